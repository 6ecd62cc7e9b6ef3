//! pfil
