mod absurd;
mod cli;
mod compare;
mod embedded;
mod faults;
mod h2;
mod html;
#[cfg(feature = "k8s")]
mod k8s;
mod layouts;
mod live;
mod merge;
mod nginx;
mod open_loop;
mod slo;
mod sweep;
