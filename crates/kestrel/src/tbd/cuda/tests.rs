//! Unit tests of the kernel source assembly and the wave form's work order.

use super::*;
use crate::tbd::frames::Dtype;
use crate::tbd::speeds_directions;

#[test]
fn the_wave_order_puts_every_tile_after_what_it_waits_for() {
    // Each (period, row, column) once, and after the nine tiles of the period before
    // around it (what the kernel waits for), for lags of 1 to 9 and grids with one
    // row or column, or more rows than periods x lag.
    for (periods, lag, tx, ty) in [(3, 1, 4, 5), (2, 8, 16, 64), (4, 5, 3, 2), (5, 9, 1, 7)] {
        let order = wave_order(periods, lag, tx, ty);
        assert_eq!(order.len(), periods as usize * tx * ty);
        let mut at = std::collections::HashMap::new();
        for (i, &o) in order.iter().enumerate() {
            let key = (o & 0xff, (o >> 8) & 0xfff, o >> 20);
            assert!(at.insert(key, i).is_none(), "{key:?} twice");
        }
        for (&(j, r, c), &i) in &at {
            if j == 0 {
                continue;
            }
            for dr in -1i64..=1 {
                for dc in -1i64..=1 {
                    let (rr, cc) = (r as i64 + dr, c as i64 + dc);
                    if rr < 0 || cc < 0 || rr >= ty as i64 || cc >= tx as i64 {
                        continue;
                    }
                    let before = at[&(j - 1, rr as u32, cc as u32)];
                    assert!(
                        before < i,
                        "{periods} periods, lag {lag}: ({j}, {r}, {c}) at {i} before ({}, {rr}, {cc}) at {before}",
                        j - 1
                    );
                }
            }
        }
    }
    // The kernel's check: a tile must hold the state it samples.
    let motions = speeds_directions(&[0.0, 1.0], 12).unwrap();
    let wave = |frames, block| KernelConfig {
        variant: Variant::Wave { periods: 3, lag: 6 },
        ..KernelConfig::late(false, frames, block)
    };
    assert!(wave(10, (32, 16)).check(&motions).is_ok());
    for (periods, lag) in [(0, 6), (256, 6), (3, 0), (3, 4096)] {
        let c = KernelConfig {
            variant: Variant::Wave { periods, lag },
            ..wave(10, (32, 16))
        };
        assert!(c.check(&motions).is_err(), "{}", c.name());
    }
    assert!(wave(10, (32, 8)).check(&motions).is_err());
    assert!(wave(16, (32, 16)).check(&motions).is_err());
    assert_eq!(wave(10, (32, 16)).frames_per_launch(), 30);
    assert_eq!(wave(10, (32, 16)).maps_per_launch(), 3);
}

#[test]
fn late_frame_tiles_are_counted_at_their_wider_form() {
    // 13 vectors of speed <= 1, D10, 32 x 16 blocks of 2 pixels: tiles of 34 rows; the
    // split rows would be 82 cells wide (64 + 2 x 9), the row-major chunked ones (f16
    // and f32 state) are 88 (12 + 64 + 9, to a multiple of 4), the wider; four tiles
    // for the late kernel, three for the wave kernel.
    let m = speeds_directions(&[0.0, 1.0], 12).unwrap();
    let cfg = |half| KernelConfig::late(half, 10, (32, 16));
    for half in [false, true] {
        assert_eq!(tiled_shared_bytes(&cfg(half), &m), 4 * 88 * 34 * 4);
        assert!(cfg(half).check(&m).is_ok());
        let wave = KernelConfig {
            variant: Variant::Wave { periods: 3, lag: 6 },
            ..cfg(half)
        };
        assert_eq!(tiled_shared_bytes(&wave, &m), 3 * 88 * 34 * 4);
    }
    // Four tiles of 26 rows of 152 (64 x 8 blocks): more than 48 KB, refused.
    assert!(KernelConfig::late(false, 10, (64, 8)).check(&m).is_err());
    // The text the launcher compiles says which form a width gets.
    let src = |w| source(&m, Dtype::F32, &cfg(true), w);
    assert!(src(1024).contains("#define FRAME_W4 1\n"));
    assert!(src(1022).contains("#define FRAME_W4 0\n"));
    assert!(src(1022).contains("#define FRAME_W2 1\n"));
    assert!(src(1021).contains("#define FRAME_W2 0\n"));
}
