mod absurd;
mod cli;
mod compare;
mod embedded;
mod faults;
mod layouts;
mod nginx;
