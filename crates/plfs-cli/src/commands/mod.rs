//! One module per subcommand: parse options, call the core, print.

pub mod bench;
pub mod bench_cost;
pub mod bench_fuse;
pub mod bench_mdtest;
pub mod bench_open;
pub mod bench_restart;
pub mod check_config;
pub mod cp;
pub mod demo;
pub mod df;
pub mod flatten;
pub mod getstripe;
pub mod ls;
pub mod map;
pub mod migrate;
pub mod mkdir;
pub mod mount;
pub mod mv;
pub mod query;
pub mod recover;
pub mod rm;
pub mod setstripe;
pub mod stat;
pub mod umount;
pub mod version;
