// Caddy as its own cmd/caddy builds it (the standard modules, nothing else): the tests'
// second HTTP/3 server, built by tools/caddy/build at the version go.mod names.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() {
	caddycmd.Main()
}
