//! A minimal reader for the safetensors format: an 8-byte little-endian header length, a JSON header naming each
//! tensor's dtype, shape and byte range, then the raw little-endian data. F32, F16 and BF16 tensors come out as f32.

use std::collections::HashMap;

use super::EmbedError;
use super::kernels::F16;

/// The JSON header must fit in this many bytes (the format's own limit is 100 MB).
const MAX_HEADER: usize = 100 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    F32,
    F16,
    Bf16,
    /// Any other dtype (integers, f64, ...): listed, but not loadable as f32.
    Other,
}

impl Dtype {
    fn parse(s: &str) -> Dtype {
        match s {
            "F32" => Dtype::F32,
            "F16" => Dtype::F16,
            "BF16" => Dtype::Bf16,
            _ => Dtype::Other,
        }
    }

    fn size(self) -> Option<usize> {
        match self {
            Dtype::F32 => Some(4),
            Dtype::F16 | Dtype::Bf16 => Some(2),
            Dtype::Other => None,
        }
    }
}

#[derive(Debug)]
struct Entry {
    dtype: Dtype,
    dtype_name: String,
    shape: Vec<usize>,
    /// Absolute byte range in the file.
    start: usize,
    end: usize,
}

/// A parsed safetensors file held in memory.
pub struct SafeTensors {
    bytes: Vec<u8>,
    entries: HashMap<String, Entry>,
}

impl SafeTensors {
    /// Parses the header of a whole safetensors file and checks every tensor's byte range.
    pub fn parse(bytes: Vec<u8>) -> Result<SafeTensors, EmbedError> {
        let bad = |m: String| EmbedError::BadFormat(format!("model.safetensors: {m}"));
        let Some(len_bytes) = bytes.get(..8) else {
            return Err(bad("file is shorter than its 8-byte header length".into()));
        };
        let header_len = u64::from_le_bytes(len_bytes.try_into().unwrap_or([0; 8]));
        let header_len = usize::try_from(header_len).unwrap_or(usize::MAX);
        if header_len > MAX_HEADER || header_len > bytes.len() - 8 {
            return Err(bad(format!(
                "header length {header_len} does not fit the file"
            )));
        }
        let data_start = 8 + header_len;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&bytes[8..data_start])
                .map_err(|e| bad(format!("header is not a JSON object: {e}")))?;
        let data_len = bytes.len() - data_start;
        let mut entries = HashMap::new();
        for (name, info) in header {
            if name == "__metadata__" {
                continue;
            }
            let dtype_name = info
                .get("dtype")
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string();
            let dtype = Dtype::parse(&dtype_name);
            let shape: Option<Vec<usize>> =
                info.get("shape").and_then(|v| v.as_array()).and_then(|a| {
                    a.iter()
                        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                        .collect()
                });
            let offsets: Option<Vec<usize>> = info
                .get("data_offsets")
                .and_then(|v| v.as_array())
                .and_then(|a| {
                    a.iter()
                        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                        .collect()
                });
            let (Some(shape), Some(offsets)) = (shape, offsets) else {
                return Err(bad(format!("tensor {name} lacks a shape or data_offsets")));
            };
            let [start, end] = offsets[..] else {
                return Err(bad(format!(
                    "tensor {name}: data_offsets must be two numbers"
                )));
            };
            if start > end || end > data_len {
                return Err(bad(format!(
                    "tensor {name}: byte range {start}..{end} is outside the data"
                )));
            }
            if let Some(size) = dtype.size() {
                let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
                if count.and_then(|c| c.checked_mul(size)) != Some(end - start) {
                    return Err(bad(format!(
                        "tensor {name}: shape {shape:?} does not match its {} bytes",
                        end - start
                    )));
                }
            }
            entries.insert(
                name,
                Entry {
                    dtype,
                    dtype_name,
                    shape,
                    start: data_start + start,
                    end: data_start + end,
                },
            );
        }
        Ok(SafeTensors { bytes, entries })
    }

    /// Whether a tensor of this name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// A tensor as f32 values (row-major) after checking its shape.
    pub fn f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let bad =
            |m: String| EmbedError::BadFormat(format!("model.safetensors: tensor {name}: {m}"));
        let Some(e) = self.entries.get(name) else {
            return Err(bad("missing".into()));
        };
        if e.shape != shape {
            return Err(bad(format!("shape is {:?}, expected {shape:?}", e.shape)));
        }
        let raw = &self.bytes[e.start..e.end];
        Ok(match e.dtype {
            Dtype::F32 => f32_from_le(raw),
            Dtype::F16 => raw
                .chunks_exact(2)
                .map(|b| F16(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect(),
            Dtype::Bf16 => raw
                .chunks_exact(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
            Dtype::Other => {
                return Err(bad(format!(
                    "dtype {} is not supported (need F32, F16 or BF16)",
                    e.dtype_name
                )));
            }
        })
    }
}

/// Little-endian f32 bytes to values. On little-endian CPUs this is one copy, which also keeps loading fast in
/// unoptimised (debug) builds.
fn f32_from_le(raw: &[u8]) -> Vec<f32> {
    let n = raw.len() / 4;
    #[cfg(target_endian = "little")]
    {
        let mut out = vec![0f32; n];
        // SAFETY: `out` owns n * 4 writable bytes, `raw` has at least that many, the two do not overlap, and every
        // bit pattern is a valid f32.
        unsafe {
            std::ptr::copy_nonoverlapping(raw.as_ptr(), out.as_mut_ptr().cast::<u8>(), n * 4)
        };
        out
    }
    #[cfg(not(target_endian = "little"))]
    {
        raw.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn reads_f32_f16_bf16() {
        let mut data = Vec::new();
        for x in [1.5f32, -2.0] {
            data.extend_from_slice(&x.to_le_bytes());
        }
        data.extend_from_slice(&0x3c00u16.to_le_bytes()); // 1.0 in f16
        data.extend_from_slice(&0xc000u16.to_le_bytes()); // -2.0 in f16
        data.extend_from_slice(&0x3f80u16.to_le_bytes()); // 1.0 in bf16
        let h = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
            "b":{"dtype":"F16","shape":[1,2],"data_offsets":[8,12]},
            "c":{"dtype":"BF16","shape":[1],"data_offsets":[12,14]}}"#;
        let st = SafeTensors::parse(file(h, &data)).unwrap();
        assert_eq!(st.f32("a", &[2]).unwrap(), vec![1.5, -2.0]);
        assert_eq!(st.f32("b", &[1, 2]).unwrap(), vec![1.0, -2.0]);
        assert_eq!(st.f32("c", &[1]).unwrap(), vec![1.0]);
        assert!(st.f32("a", &[3]).is_err());
        assert!(st.f32("zz", &[1]).is_err());
    }

    #[test]
    fn rejects_broken_files() {
        assert!(SafeTensors::parse(vec![1, 2, 3]).is_err());
        assert!(SafeTensors::parse(file("{", &[])).is_err());
        assert!(
            SafeTensors::parse(file(
                r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
                &[0; 8]
            ))
            .is_err()
        );
        assert!(
            SafeTensors::parse(file(
                r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                &[0; 8]
            ))
            .is_err()
        );
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        assert!(SafeTensors::parse(huge).is_err());
    }
}
