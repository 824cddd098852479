//! A parallel writer of uncompressed `.npz` archives (zip, "stored", always zip64).
//!
//! Written by hand because the zip writers available as crates write one member after
//! another through one `Write`, computing the CRC on the same thread: about 1 GB/s,
//! which made writing a 10^6-track result take ten times longer than computing it.
//! Stored members have sizes known in advance, so every byte's offset in the file is
//! known before anything is written: each member's data go to the file in one positioned
//! write (`pwrite`) while the other threads compute the CRC-32 of its pieces, combined
//! with `crc32fast::Hasher::combine` (several writers to one file only queue for its
//! lock); the local headers, which hold the CRCs, are written last, then the central
//! directory.
//!
//! Layout (APPNOTE 6.3): for each member a local header with a zip64 extra field (sizes
//! as 64-bit), the `.npy` bytes (NPY 1.0 header + little-endian values); then the
//! central directory with zip64 extras (sizes and offset), the zip64 end record and
//! locator, and the classic end record with its 32-bit fields saturated.

use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes per parallel CRC piece.
const PIECE: usize = 8 << 20;

/// One array of the archive: its name (without `.npy`), NumPy `descr` (`<f8`, `<f4`),
/// shape, and its values as raw little-endian bytes.
pub(crate) struct Member<'a> {
    pub name: &'a str,
    pub descr: &'static str,
    pub shape: Vec<usize>,
    pub data: &'a [u8],
}

/// The NPY 1.0 header of an array: magic, version, length, the dict, padded with spaces
/// and a newline so that the data start at a multiple of 64 bytes.
pub(crate) fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let total = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(total.next_multiple_of(64) - total));
    dict.push('\n');
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h
}

fn u16le(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u32le(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u64le(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// 1980-01-01 00:00 in MS-DOS form (the archive's members carry no meaningful time).
// Year 0 (1980) in bits 9-15, month 1 in bits 5-8, day 1 in bits 0-4.
const DOS_DATE: u16 = (1 << 5) | 1;
/// Version 4.5: zip64.
const VERSION: u16 = 45;

fn local_header(name: &[u8], crc: u32, size: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(30 + name.len() + 20);
    u32le(&mut h, 0x0403_4b50);
    u16le(&mut h, VERSION);
    u16le(&mut h, 0); // flags
    u16le(&mut h, 0); // stored
    u16le(&mut h, 0); // time
    u16le(&mut h, DOS_DATE);
    u32le(&mut h, crc);
    u32le(&mut h, u32::MAX); // sizes in the zip64 extra
    u32le(&mut h, u32::MAX);
    u16le(&mut h, name.len() as u16);
    u16le(&mut h, 20);
    h.extend_from_slice(name);
    u16le(&mut h, 0x0001);
    u16le(&mut h, 16);
    u64le(&mut h, size);
    u64le(&mut h, size);
    h
}

fn central_header(name: &[u8], crc: u32, size: u64, offset: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(46 + name.len() + 28);
    u32le(&mut h, 0x0201_4b50);
    u16le(&mut h, VERSION | (3 << 8)); // made by: Unix
    u16le(&mut h, VERSION);
    u16le(&mut h, 0);
    u16le(&mut h, 0);
    u16le(&mut h, 0);
    u16le(&mut h, DOS_DATE);
    u32le(&mut h, crc);
    u32le(&mut h, u32::MAX);
    u32le(&mut h, u32::MAX);
    u16le(&mut h, name.len() as u16);
    u16le(&mut h, 28);
    u16le(&mut h, 0); // comment
    u16le(&mut h, 0); // disk
    u16le(&mut h, 0); // internal attributes
    u32le(&mut h, 0o100644 << 16); // external: a regular file, rw-r--r--
    u32le(&mut h, u32::MAX); // offset in the zip64 extra
    h.extend_from_slice(name);
    u16le(&mut h, 0x0001);
    u16le(&mut h, 24);
    u64le(&mut h, size);
    u64le(&mut h, size);
    u64le(&mut h, offset);
    h
}

/// Writes `bytes` at `offset` of `file` with one positioned write while the other cores
/// compute the CRC-32 of its pieces; returns the CRC state.
///
/// One writer, not one per piece: buffered writes to one file take the file's lock in
/// turn (ext4, xfs), so parallel writers only wait for each other (measured: the kernel
/// spent more time spinning on that lock than copying).
fn write_crc(file: &File, offset: u64, bytes: &[u8]) -> std::io::Result<crc32fast::Hasher> {
    let (written, parts) = rayon::join(
        || file.write_all_at(bytes, offset),
        || {
            bytes
                .par_chunks(PIECE)
                .map(|piece| {
                    let mut h = crc32fast::Hasher::new();
                    h.update(piece);
                    h
                })
                .collect::<Vec<_>>()
        },
    );
    written?;
    let mut crc = crc32fast::Hasher::new();
    for p in parts {
        crc.combine(&p);
    }
    Ok(crc)
}

/// Writes the archive of `members` into `file` from offset 0 (the file is empty).
pub(crate) fn write(file: &File, members: &[Member<'_>]) -> std::io::Result<()> {
    // Offsets of every member's local header and data, known from the sizes alone.
    let mut plan = Vec::with_capacity(members.len());
    let mut at = 0u64;
    for m in members {
        let name = format!("{}.npy", m.name).into_bytes();
        let header = npy_header(m.descr, &m.shape);
        let size = (header.len() + m.data.len()) as u64;
        let data_at = at + (30 + name.len() + 20) as u64;
        plan.push((name, header, size, at, data_at));
        at = data_at + size;
    }
    let mut central = Vec::new();
    for ((name, header, size, local_at, data_at), m) in plan.iter().zip(members) {
        file.write_all_at(header, *data_at)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(header);
        crc.combine(&write_crc(file, data_at + header.len() as u64, m.data)?);
        let crc = crc.finalize();
        file.write_all_at(&local_header(name, crc, *size), *local_at)?;
        central.extend(central_header(name, crc, *size, *local_at));
    }
    let cd_at = at;
    let cd_len = central.len() as u64;
    let n = members.len() as u64;
    let mut end = central;
    // Zip64 end of central directory record and locator.
    let z64_at = cd_at + cd_len;
    u32le(&mut end, 0x0606_4b50);
    u64le(&mut end, 44);
    u16le(&mut end, VERSION | (3 << 8));
    u16le(&mut end, VERSION);
    u32le(&mut end, 0);
    u32le(&mut end, 0);
    u64le(&mut end, n);
    u64le(&mut end, n);
    u64le(&mut end, cd_len);
    u64le(&mut end, cd_at);
    u32le(&mut end, 0x0706_4b50);
    u32le(&mut end, 0);
    u64le(&mut end, z64_at);
    u32le(&mut end, 1);
    // The classic end record, its fields saturated so readers use the zip64 record.
    u32le(&mut end, 0x0605_4b50);
    u16le(&mut end, 0);
    u16le(&mut end, 0);
    u16le(&mut end, n.min(0xffff) as u16);
    u16le(&mut end, n.min(0xffff) as u16);
    u32le(&mut end, u32::MAX);
    u32le(&mut end, u32::MAX);
    u16le(&mut end, 0);
    file.write_all_at(&end, cd_at)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::ArrayD;

    fn bytes_of<T>(v: &[T]) -> &[u8] {
        // SAFETY: plain floats, no padding.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
    }

    #[test]
    fn headers_are_padded_to_64_bytes() {
        for shape in [vec![3], vec![2, 5, 4, 4], vec![0, 7], vec![123_456_789, 3]] {
            let h = npy_header("<f8", &shape);
            assert_eq!(h.len() % 64, 0, "{shape:?}");
            assert_eq!(*h.last().unwrap(), b'\n');
            assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
            assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
        }
        let one = String::from_utf8_lossy(&npy_header("<f4", &[3])).into_owned();
        assert!(one.contains("'shape': (3,), "), "{one}");
    }

    #[test]
    fn archives_read_back_with_a_zip_reader_and_numpy() {
        // 3.2 M doubles (25 MB) span several parallel pieces: the combined CRC is checked
        // by the reader.
        let big: Vec<f64> = (0..3_200_000).map(|i| (i as f64).sin() * 1e3).collect();
        let small: Vec<f32> = (0..30).map(|i| i as f32 * 0.5 - 3.0).collect();
        let empty: Vec<f64> = Vec::new();
        let members = [
            Member {
                name: "big",
                descr: "<f8",
                shape: vec![1600, 2000],
                data: bytes_of(&big),
            },
            Member {
                name: "small",
                descr: "<f4",
                shape: vec![2, 3, 5],
                data: bytes_of(&small),
            },
            Member {
                name: "empty",
                descr: "<f8",
                shape: vec![0, 4],
                data: bytes_of(&empty),
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npz");
        let file = File::create(&path).unwrap();
        write(&file, &members).unwrap();
        drop(file);
        let mut npz =
            ndarray_npy::NpzReader::new(std::io::BufReader::new(File::open(&path).unwrap()))
                .unwrap();
        let b: ArrayD<f64> = npz.by_name("big").unwrap();
        assert_eq!(b.shape(), [1600, 2000]);
        assert!(b.iter().zip(&big).all(|(x, y)| x == y));
        let s: ArrayD<f32> = npz.by_name("small").unwrap();
        assert_eq!(s.shape(), [2, 3, 5]);
        assert!(s.iter().zip(&small).all(|(x, y)| x == y));
        let e: ArrayD<f64> = npz.by_name("empty").unwrap();
        assert_eq!(e.shape(), [0, 4]);
        // NumPy itself, where it is installed (zipfile checks every CRC on read).
        let script = "import sys, numpy as np\n\
            a = np.load(sys.argv[1])\n\
            b = a['big']; s = a['small']\n\
            assert b.shape == (1600, 2000) and b.dtype == np.float64\n\
            assert np.array_equal(b.ravel(), np.sin(np.arange(3200000.0)) * 1e3)\n\
            assert s.dtype == np.float32 and s.shape == (2, 3, 5) and s[1, 2, 4] == 29 * 0.5 - 3\n\
            assert a['empty'].shape == (0, 4)\n\
            print('numpy ok')\n";
        match std::process::Command::new("python3")
            .args(["-c", script, path.to_str().unwrap()])
            .output()
        {
            Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named 'numpy'") => {
                eprintln!("numpy check skipped: numpy is not installed");
            }
            Ok(o) => assert!(
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains("numpy ok"),
                "numpy could not read the archive: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("numpy check skipped: no python3 ({e})"),
        }
    }
}
