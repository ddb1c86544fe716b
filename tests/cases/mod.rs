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
mod mix;
mod nginx;
mod open_loop;
mod scripts;
mod slo;
mod sweep;
