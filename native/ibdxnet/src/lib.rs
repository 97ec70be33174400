//! # ibdxnet
//!
//! A Rust port of Ibdxnet, the native InfiniBand engine of the Java
//! messaging library DXNet.
//!
//! * [`fabric`]: RDMA resources behind one trait, with a real libibverbs
//!   implementation ([`fabric::verbs`]) and an in-process simulator
//!   ([`fabric::sim`]).
//! * [`con`]: connection management: node ids, UDP discovery and queue pair
//!   exchange, the job thread.
//! * [`msgrc`]: the messaging engine: send and receive threads.
//! * [`jni`]: the JNI binding for the Java transport.
//! * [`loopback`]: a streaming engine user for benchmarks and tests.
//! * [`sys`]: thread parking, a lock-free queue, registered memory.
//! * [`abi`]: the contract with Java and C: the `#[repr(C)]` structures they
//!   share, their layout table and the constants they take.
//!
//! ## Quick start
//! ```
//! use ibdxnet::fabric::{Fabric, FabricConfig, sim::SimFabric};
//! let fabric = SimFabric::open(&FabricConfig::default()).unwrap();
//! assert!(fabric.info().max_qp_wr > 0);
//! ```
//!
//! ## Thread safety
//! Every fabric resource is `Send + Sync`; posting and polling may happen
//! from any thread, as with libibverbs.
//!
//! ## Cleanup
//! Resources keep what they depend on alive (a queue pair its completion
//! queues, everything the device), so they can be dropped in any order.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(improper_ctypes_definitions)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod con;
pub mod driver;
pub mod fabric;
pub mod jni;
pub mod loopback;
pub mod msgrc;
pub mod sys;
pub(crate) mod util;
