//! The TBD kernels' parameters (`kernels/*.cu`), named and ordered as the kernels
//! declare them: every frame-folding kernel takes [`Step`]'s; the staged and packed
//! kernels built in their wave form take [`WaveStep`]'s; the switching model's kernel
//! [`Switch`]'s.

use crate::cuda::{params, Buf};

params! {
    /// A launch's frames folded into the state: the state read (`s_prev`) and written
    /// (`s_next`), the launch's frames, the maps written, the frame's size and the
    /// forgetting factor.
    pub(crate) struct Step<'a> for [
        "tbd_fused", "tbd_tiled", "tbd_lean", "tbd_packed", "tbd_staged", "tbd_fused_cells",
        "tbd_vec_*",
    ] {
        s_prev: Buf<'a>, s_next: Buf<'a>, frames: Buf<'a>, score: Buf<'a>, arg: Buf<'a>,
        h: i32, w: i32, alpha: f32,
    }
    /// [`Step`]'s and the wave form's: the work order, the ticket counter, the tiles'
    /// flags, the first ticket of the launch and its first period.
    pub(crate) struct WaveStep<'a> for ["tbd_packed", "tbd_staged"] {
        s_prev: Buf<'a>, s_next: Buf<'a>, frames: Buf<'a>, score: Buf<'a>, arg: Buf<'a>,
        h: i32, w: i32, alpha: f32, order: Buf<'a>, ticket: Buf<'a>, flags: Buf<'a>, base: u64,
        gp0: u32,
    }
    /// One frame of the switching model: [`Step`]'s (one frame), the transition's
    /// columns, and whether this frame's maps are written.
    pub(crate) struct Switch<'a> for ["tbd_switch"] {
        s_prev: Buf<'a>, s_next: Buf<'a>, frame: Buf<'a>, score: Buf<'a>, arg: Buf<'a>, h: i32,
        w: i32, alpha: f32, col_start: Buf<'a>, col_src: Buf<'a>, col_wt: Buf<'a>, emit: i32,
    }
}
