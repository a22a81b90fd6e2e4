//! fault lab
