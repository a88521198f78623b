//! TEMPORARY stand-in (replaced by the npy branch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType { Bool, I8, U8, I16, U16, I32, U32, I64, U64, F16, F32, F64 }
impl DType {
    pub fn size(self) -> usize { 4 }
    pub fn descr(self) -> &'static str { "<f4" }
}
#[derive(Debug, Clone, PartialEq)]
pub struct Npy<'a> { pub dtype: DType, pub shape: Vec<usize>, pub data: &'a [u8] }
pub fn parse(bytes: &[u8]) -> Result<Npy<'_>, String> { Ok(Npy { dtype: DType::F32, shape: vec![bytes.len() / 4], data: &bytes[..bytes.len() / 4 * 4] }) }
pub const MAX_DIMS: usize = 32;
