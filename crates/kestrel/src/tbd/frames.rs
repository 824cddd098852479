//! Frame sequences on disk: `.npy` arrays `[T, H, W]` (or `[H, W]`, one frame) of u8,
//! u16 or f32 (f64 accepted too), or a directory of such files taken in name order.
//! Files are memory-mapped and read one frame at a time, so a sequence longer than
//! memory streams through (the kernel pages frames in on demand and drops them again).

use crate::error::{Error, Result};
use crate::io::write_atomic;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Element type of a frame file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// Unsigned 8-bit.
    U8,
    /// Unsigned 16-bit, little-endian.
    U16,
    /// 32-bit float, little-endian.
    F32,
    /// 64-bit float, little-endian.
    F64,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::U16 => 2,
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }

    fn descr(self) -> &'static str {
        match self {
            Dtype::U8 => "|u1",
            Dtype::U16 => "<u2",
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
        }
    }

    /// `u8`, `u16`, `f32` or `f64`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "u8",
            Dtype::U16 => "u16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }
}

fn bad(path: &Path, msg: impl Into<String>) -> Error {
    crate::io::parse_error(path, None, msg)
}

/// One mapped file: `frames` frames of `h x w` starting at byte `offset`.
struct FrameFile {
    path: PathBuf,
    map: memmap2::Mmap,
    offset: usize,
    dtype: Dtype,
    frames: usize,
    h: usize,
    w: usize,
}

/// The header of a `.npy` file through the one strict reader
/// ([`crate::io::parse_npy_header`]): (dtype, shape, data offset).
fn parse_header(path: &Path, b: &[u8]) -> Result<(Dtype, Vec<usize>, usize)> {
    let h = crate::io::parse_npy_header(path, b)?;
    let dtype = match h.descr.as_str() {
        "|u1" | "<u1" | "u1" | "|b1" => Dtype::U8,
        "<u2" => Dtype::U16,
        "<f4" => Dtype::F32,
        "<f8" => Dtype::F64,
        d => {
            return Err(bad(
                path,
                format!(
                    "unsupported dtype {}: frames must be u8, u16 or f32 (little-endian)",
                    crate::io::excerpt(d.as_bytes())
                ),
            ))
        }
    };
    if h.fortran_order {
        return Err(bad(
            path,
            "Fortran-ordered arrays are not supported (save C order)",
        ));
    }
    Ok((dtype, h.shape, h.data_offset))
}

impl FrameFile {
    fn open(path: &Path) -> Result<FrameFile> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        if meta.len() == 0 {
            return Err(bad(
                path,
                "empty file (expected a .npy array of frames [T, H, W])",
            ));
        }
        // SAFETY: read-only map, read while the sequence is processed; a file truncated
        // by another process meanwhile is outside what a reader can defend against.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Sequential);
        let (dtype, shape, offset) = parse_header(path, &map)?;
        let (frames, h, w) = match shape[..] {
            [t, h, w] => (t, h, w),
            [h, w] => (1, h, w),
            _ => {
                return Err(bad(
                    path,
                    format!(
                        "expected frames [T, H, W] (or one frame [H, W]), found shape {shape:?}"
                    ),
                ))
            }
        };
        if h == 0 || w == 0 {
            return Err(bad(
                path,
                format!("frames of {h} x {w} pixels hold nothing"),
            ));
        }
        let need = frames
            .checked_mul(h)
            .and_then(|n| n.checked_mul(w))
            .and_then(|n| n.checked_mul(dtype.size()))
            .and_then(|n| n.checked_add(offset))
            .ok_or_else(|| bad(path, format!("shape {shape:?} is too large")))?;
        if need > map.len() {
            return Err(bad(
                path,
                format!(
                    "truncated: shape {shape:?} of {} needs {need} bytes, the file has {}",
                    dtype.name(),
                    map.len()
                ),
            ));
        }
        Ok(FrameFile {
            path: path.to_path_buf(),
            map,
            offset,
            dtype,
            frames,
            h,
            w,
        })
    }
}

/// A sequence of frames of one size, from one file or a directory of files.
pub struct Frames {
    files: Vec<FrameFile>,
    /// Index of the first frame of each file.
    starts: Vec<usize>,
    /// Frames in the sequence.
    pub len: usize,
    /// Frame height.
    pub h: usize,
    /// Frame width.
    pub w: usize,
}

impl Frames {
    /// Opens a `.npy` file or a directory of `.npy` files (name order; each `[T, H, W]`
    /// or `[H, W]`). Frames of different sizes, a sequence of no frames, an unknown
    /// dtype and a truncated file are errors naming the file.
    pub fn open(path: &Path) -> Result<Frames> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let paths: Vec<PathBuf> = if meta.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| Error::io(path, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")))
                .collect();
            v.sort();
            if v.is_empty() {
                return Err(bad(
                    path,
                    "empty sequence: the directory holds no .npy frames",
                ));
            }
            v
        } else {
            vec![path.to_path_buf()]
        };
        let mut files = Vec::with_capacity(paths.len());
        let mut starts = Vec::with_capacity(paths.len());
        let mut len = 0usize;
        for p in &paths {
            let f = FrameFile::open(p)?;
            if let Some(first) = files.first() {
                let first: &FrameFile = first;
                if (f.h, f.w) != (first.h, first.w) {
                    return Err(bad(
                        p,
                        format!(
                            "frames of different sizes: {} x {} here, {} x {} in {}",
                            f.w,
                            f.h,
                            first.w,
                            first.h,
                            first.path.display()
                        ),
                    ));
                }
            }
            starts.push(len);
            len += f.frames;
            files.push(f);
        }
        if len == 0 {
            return Err(bad(path, "empty sequence: no frames (T = 0)"));
        }
        let (h, w) = (files[0].h, files[0].w);
        Ok(Frames {
            files,
            starts,
            len,
            h,
            w,
        })
    }

    fn locate(&self, t: usize) -> (&FrameFile, usize) {
        let i = self.starts.partition_point(|&s| s <= t) - 1;
        (&self.files[i], t - self.starts[i])
    }

    /// The element type of frame `t`.
    pub fn dtype(&self, t: usize) -> Dtype {
        self.locate(t).0.dtype
    }

    /// The bytes of frame `t` as stored (little-endian).
    pub fn raw(&self, t: usize) -> &[u8] {
        let (f, k) = self.locate(t);
        let n = f.h * f.w * f.dtype.size();
        &f.map[f.offset + k * n..][..n]
    }

    /// Frame `t` converted to f32 into `out` (`h * w`); a value that is not finite is
    /// an error naming the frame and pixel.
    pub fn read(&self, t: usize, out: &mut [f32]) -> Result<()> {
        let (f, _) = self.locate(t);
        let raw = self.raw(t);
        assert_eq!(out.len(), f.h * f.w);
        match f.dtype {
            Dtype::U8 => out.iter_mut().zip(raw).for_each(|(o, &b)| *o = b as f32),
            Dtype::U16 => out
                .iter_mut()
                .zip(raw.chunks_exact(2))
                .for_each(|(o, b)| *o = u16::from_le_bytes([b[0], b[1]]) as f32),
            Dtype::F32 => out
                .iter_mut()
                .zip(raw.chunks_exact(4))
                .for_each(|(o, b)| *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::F64 => out.iter_mut().zip(raw.chunks_exact(8)).for_each(|(o, b)| {
                *o = f64::from_le_bytes(b.try_into().expect("chunks of 8 bytes")) as f32
            }),
        }
        if matches!(f.dtype, Dtype::F32 | Dtype::F64) {
            self.check_finite(t, out)?;
        }
        Ok(())
    }

    /// Frame `t` as f32: borrowed from the mapped file, without a copy, when it is stored
    /// as f32 in this machine's byte order at an aligned offset (NumPy aligns its data);
    /// else converted into `buf` (`h * w`) as [`Frames::read`] does. A value that is not
    /// finite is an error naming the frame and pixel.
    pub fn frame<'a>(&'a self, t: usize, buf: &'a mut [f32]) -> Result<&'a [f32]> {
        if self.dtype(t) == Dtype::F32 && cfg!(target_endian = "little") {
            // SAFETY: every bit pattern is an f32; `align_to` only hands out the aligned
            // middle, which is used only when it is the whole frame.
            let (head, mid, tail) = unsafe { self.raw(t).align_to::<f32>() };
            if head.is_empty() && tail.is_empty() {
                self.check_finite(t, mid)?;
                return Ok(mid);
            }
        }
        self.read(t, buf)?;
        Ok(buf)
    }

    /// An error naming the first value of frame `t` that is not finite.
    fn check_finite(&self, t: usize, v: &[f32]) -> Result<()> {
        // A vectorised pass first (no early exit); the position only when one is bad.
        if v.iter().fold(true, |ok, x| ok & x.is_finite()) {
            return Ok(());
        }
        let (f, k) = self.locate(t);
        let i = v.iter().position(|v| !v.is_finite()).unwrap_or(0);
        Err(bad(
            &f.path,
            format!(
                "frame {k}, pixel x {} y {}: value is not finite",
                i % f.w,
                i / f.w
            ),
        ))
    }

    /// The files' element types, all the same (else `None`).
    pub fn common_dtype(&self) -> Option<Dtype> {
        let d = self.files[0].dtype;
        self.files.iter().all(|f| f.dtype == d).then_some(d)
    }
}

/// The header of a `.npy` array of `shape` (version 1.0, data aligned to 64 bytes).
pub fn npy_header(dtype: Dtype, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut text = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        dtype.descr()
    );
    // Magic (6) + version (2) + length (2) + text + '\n', padded to 64 bytes.
    let total = (10 + text.len() + 1).div_ceil(64) * 64;
    while 10 + text.len() + 1 < total {
        text.push(' ');
    }
    text.push('\n');
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend((text.len() as u16).to_le_bytes());
    h.extend(text.as_bytes());
    h
}

/// Element data a `.npy` file can hold.
pub trait NpyElement: Copy {
    /// The file's element type.
    const DTYPE: Dtype;
    /// Appends the little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
}

impl NpyElement for u8 {
    const DTYPE: Dtype = Dtype::U8;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self)
    }
}

impl NpyElement for u16 {
    const DTYPE: Dtype = Dtype::U16;
    fn put(self, out: &mut Vec<u8>) {
        out.extend(self.to_le_bytes())
    }
}

impl NpyElement for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn put(self, out: &mut Vec<u8>) {
        out.extend(self.to_le_bytes())
    }
}

/// Writes `data` as one `.npy` array of `shape` (through the atomic writer).
pub fn write_npy<T: NpyElement>(path: &Path, shape: &[usize], data: &[T]) -> Result<()> {
    let n: usize = shape.iter().product();
    if n != data.len() {
        return Err(Error::input(format!(
            "{}: {} values for shape {shape:?}",
            path.display(),
            data.len()
        )));
    }
    write_atomic(path, |w| {
        w.write_all(&npy_header(T::DTYPE, shape))?;
        let mut buf = Vec::with_capacity(1 << 16);
        for chunk in data.chunks(1 << 14) {
            buf.clear();
            chunk.iter().for_each(|v| v.put(&mut buf));
            w.write_all(&buf)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_each_dtype() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        write_npy(&p, &[2, 3, 4], &(0..24u16).collect::<Vec<_>>()).unwrap();
        let f = Frames::open(&p).unwrap();
        assert_eq!((f.len, f.h, f.w), (2, 3, 4));
        let mut out = vec![0.0; 12];
        f.read(1, &mut out).unwrap();
        assert_eq!(out[0], 12.0);
        assert_eq!(out[11], 23.0);
        let q = dir.path().join("b.npy");
        write_npy(
            &q,
            &[3, 4],
            &(0..12).map(|i| i as f32 * 0.5).collect::<Vec<_>>(),
        )
        .unwrap();
        let g = Frames::open(&q).unwrap();
        assert_eq!(g.len, 1);
        g.read(0, &mut out).unwrap();
        assert_eq!(out[3], 1.5);
        // The directory: both files, in name order.
        let d = Frames::open(dir.path()).unwrap();
        assert_eq!(d.len, 3);
        d.read(2, &mut out).unwrap();
        assert_eq!(out[3], 1.5);
    }

    #[test]
    fn f32_frames_are_borrowed_from_the_map_others_converted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.npy");
        let v: Vec<f32> = (0..24).map(|i| i as f32 - 3.25).collect();
        write_npy(&p, &[2, 3, 4], &v).unwrap();
        let f = Frames::open(&p).unwrap();
        let mut buf = vec![f32::NAN; 12];
        let x = f.frame(1, &mut buf).unwrap();
        assert_eq!(x, &v[12..]);
        // No copy: the slice lies in the mapped file, the buffer is untouched.
        let raw = f.raw(1).as_ptr() as usize;
        assert_eq!(x.as_ptr() as usize, raw);
        assert!(buf.iter().all(|b| b.is_nan()));
        // u8 frames are converted into the buffer.
        let q = dir.path().join("g.npy");
        write_npy(&q, &[1, 3, 4], &(0..12u8).collect::<Vec<_>>()).unwrap();
        let g = Frames::open(&q).unwrap();
        let y = g.frame(0, &mut buf).unwrap().to_vec();
        assert_eq!(y, (0..12).map(|i| i as f32).collect::<Vec<_>>());
        assert_eq!(buf, y);
        // A value that is not finite names its frame and pixel either way.
        let r = dir.path().join("h.npy");
        let mut bad = v.clone();
        bad[12 + 6] = f32::INFINITY;
        write_npy(&r, &[2, 3, 4], &bad).unwrap();
        let h = Frames::open(&r).unwrap();
        assert!(h.frame(0, &mut buf).is_ok());
        let e = h.frame(1, &mut buf).unwrap_err().to_string();
        assert!(e.contains("frame 1, pixel x 2 y 1"), "{e}");
        let e = h.read(1, &mut buf).unwrap_err().to_string();
        assert!(e.contains("frame 1, pixel x 2 y 1"), "{e}");
    }
}
