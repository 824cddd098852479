//! The `kestrel` command line.

mod bench;

fn main() {
    let mut sink = bench::Sink::default();
    let _ = bench::cpu::run(&mut sink, true);
    let _ = bench::cuda::run(&mut sink, true);
    let _ = bench::parallel::run(&mut sink, true);
}
