// The etcd server binary: etcd's own entry point, from its published server module (the
// repository's root module, which holds main.go, is not what the apiserver needs pinned).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
