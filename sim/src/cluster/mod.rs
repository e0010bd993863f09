//! The fleet around the replicas: request routing (and, later, prefill/decode
//! pools and autoscaling).

pub mod router;
