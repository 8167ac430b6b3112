//! Integration tests of the class-file rewriter: real Java compiled by
//! `javac`, instrumented by this crate, and run on a JVM that verifies every
//! class, including the boot classes.

mod support;

mod api;
mod debug_info;
mod disasm;
mod fixture_programs;
mod hand_assembled;
mod jdk_classes;
mod library_jars;
mod malformed;
mod method_size;
mod old_class_files;
