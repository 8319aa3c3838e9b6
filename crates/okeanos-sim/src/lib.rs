//! The deterministic simulator (docs/DESIGN.md sections 2 and 3): the unmodified engine, mounted
//! with its journal driven step by step, in virtual time, on in-memory devices whose timing
//! comes from device models. No thread per stream and no real clock: the same seed gives the
//! same results bit for bit.

pub mod calibrate;
pub mod check;
pub mod clock;
pub mod clocked;
pub mod crashfuzz;
pub mod iozone;
pub mod lazyckpt;
pub mod mixed;
pub mod multistream;
pub mod nearhead;
pub mod postmark;
pub mod recovery;
pub mod rng;
pub mod trace;
pub mod world;
