mod cli;
mod embedded;
mod faults;
mod layouts;
mod nginx;
