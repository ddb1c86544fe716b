//! `archbench sweep`: the same targets at a ladder of loads, to draw how each one scales. This
//! module holds what a sweep computes from its steps; the ladder runs through `compare`.

pub mod usl;
