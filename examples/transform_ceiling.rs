//! The compute ceiling of bench s003-image: rowgate's own image transform
//! (`rowgate::storage::image::render_source`: resize, then encode) of the once-decoded
//! image, as the server does for a source it has decoded, in a loop on `--threads` threads,
//! with no HTTP, no disk and no cache of results; each call a new random size in 250–349 ×
//! 250–349, as the load's requests are.
//!
//!   cargo run --release --example transform_ceiling -- --image logo.png --seconds 10 --threads 2
//!
//! Prints `{"renders": N, "seconds": S, "renders_per_s": R, "threads": T}`.

use std::time::{Duration, Instant};

use rowgate::storage::image::{decode, render_source};
use rowgate::storage::transform::{Resize, Transform};

fn main() {
    let mut image = None;
    let mut seconds = 10.0_f64;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--image" => image = Some(value),
            "--seconds" => seconds = value.parse().expect("--seconds: a number"),
            "--threads" => threads = value.parse().expect("--threads: a number"),
            other => panic!("unknown flag {other}"),
        }
    }
    let bytes = std::fs::read(image.expect("--image PATH")).expect("the image can be read");
    let source = decode(&bytes).expect("the image decodes");
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let renders: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let source = &source;
                s.spawn(move || {
                    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ (i as u64 + 1);
                    let mut next = move || {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        250 + (state % 100) as u32
                    };
                    let mut n = 0;
                    while Instant::now() < deadline {
                        let t = Transform {
                            width: Some(next()),
                            height: Some(next()),
                            resize: Resize::Cover,
                            ..Transform::default()
                        };
                        render_source(source, t, false).expect("the image renders");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a worker panicked")).sum()
    });
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{{\"renders\": {renders}, \"seconds\": {elapsed:.3}, \"renders_per_s\": {:.2}, \"threads\": {threads}}}",
        renders as f64 / elapsed
    );
}
