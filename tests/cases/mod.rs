mod cli;
mod embedded;
mod layouts;
mod nginx;
