//! What an executable was built as, read from its own bytes: the ELF machine, the GNU build
//! id, and on aarch64 which atomic instructions its code holds. `nginx -V` only says how the
//! build was configured, and since GCC 10 outline atomics are the default, so the flag that
//! matters never shows there; the instructions do.

use object::elf::{PF_X, SHF_EXECINSTR};
use object::read::elf::{ElfFile, FileHeader, ProgramHeader, SectionHeader};
use object::{Architecture, Endianness, FileKind, Object};
use thiserror::Error;

use crate::stats::{AtomicInstructions, BinaryBuild};

/// Executables larger than this are not read (no server binary comes near it).
pub const MAX_EXECUTABLE_BYTES: u64 = 512 << 20;

#[derive(Debug, Error, PartialEq)]
pub enum BinaryError {
    #[error("not an ELF executable")]
    NotElf,
    #[error("its ELF headers cannot be read: {0}")]
    Malformed(String),
}

/// Reads what `bytes` (a whole executable) was built as.
pub fn read_build(bytes: &[u8]) -> Result<BinaryBuild, BinaryError> {
    match FileKind::parse(bytes) {
        Ok(FileKind::Elf64) => read_elf::<object::elf::FileHeader64<Endianness>>(bytes),
        Ok(FileKind::Elf32) => read_elf::<object::elf::FileHeader32<Endianness>>(bytes),
        _ => Err(BinaryError::NotElf),
    }
}

fn read_elf<H: FileHeader<Endian = Endianness>>(bytes: &[u8]) -> Result<BinaryBuild, BinaryError> {
    let file = ElfFile::<H>::parse(bytes).map_err(|e| BinaryError::Malformed(e.to_string()))?;
    let build_id = file
        .build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
    let architecture = file.architecture();
    let atomics = (architecture == Architecture::Aarch64).then(|| {
        let mut count = AtomicInstructions::default();
        for code in executable_code(&file) {
            count_aarch64_atomics(code, &mut count);
        }
        count
    });
    Ok(BinaryBuild {
        machine: machine_name(architecture, file.elf_header().e_machine(file.endian())),
        build_id,
        atomics,
    })
}

/// The bytes the program runs: its executable sections, or where a binary has no section
/// headers (some are stripped of them), its executable segments.
fn executable_code<'a, H: FileHeader<Endian = Endianness>>(file: &ElfFile<'a, H>) -> Vec<&'a [u8]> {
    let (endian, data) = (file.endian(), file.data());
    let sections: Vec<&[u8]> = file
        .elf_section_table()
        .iter()
        .filter(|s| s.sh_flags(endian).into() & u64::from(SHF_EXECINSTR) != 0)
        .filter_map(|s| s.data(endian, data).ok())
        .collect();
    if !sections.is_empty() {
        return sections;
    }
    file.elf_program_headers()
        .iter()
        .filter(|p| p.p_flags(endian) & PF_X != 0)
        .filter_map(|p| p.data(endian, data).ok())
        .collect()
}

/// `uname -m`'s spelling where there is one, so it compares with a node's architecture.
fn machine_name(architecture: Architecture, e_machine: u16) -> String {
    match architecture {
        Architecture::X86_64 => "x86_64".into(),
        Architecture::Aarch64 => "aarch64".into(),
        Architecture::I386 => "i686".into(),
        Architecture::Arm => "arm".into(),
        Architecture::Riscv64 => "riscv64".into(),
        Architecture::PowerPc64 => "ppc64le".into(),
        Architecture::S390x => "s390x".into(),
        _ => format!("ELF machine {e_machine}"),
    }
}

/// Counts, in A64 code (always little-endian), the ARMv8.1 LSE atomics and the LL/SC
/// exclusives. A linear sweep, as a disassembler's: data placed among the instructions counts
/// too, which is why the figures are counts and the verdict asks only whether any LSE
/// instruction is there.
pub fn count_aarch64_atomics(code: &[u8], count: &mut AtomicInstructions) {
    for word in code.chunks_exact(4) {
        let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        if is_lse_atomic(w) {
            count.lse += 1;
        } else if is_exclusive(w) {
            count.exclusive += 1;
        }
    }
}

/// CAS{A,L,AL}{B,H}, and the atomic memory operations: LD{ADD,CLR,EOR,SET,SMAX,SMIN,UMAX,
/// UMIN}* (their ST* aliases included) and SWP* (Arm ARM C4.1.94, "Atomic memory operations"
/// and "Compare and swap").
fn is_lse_atomic(w: u32) -> bool {
    // size 111 V=0 00 A R 1 Rs o3 opc 00 Rn Rt; o3=1 is SWP only with opc=000 (LDAPR and
    // unallocated otherwise).
    let memory_op = w & 0x3F20_0C00 == 0x3820_0000;
    let (o3, opc) = ((w >> 15) & 1, (w >> 12) & 7);
    // size 0010001 L 1 Rs o0 11111 Rn Rt
    let cas = w & 0x3FA0_7C00 == 0x08A0_7C00;
    (memory_op && (o3 == 0 || opc == 0)) || cas
}

/// LDXR, LDAXR, STXR, STLXR in every size (size 0010000 L 0 Rs o0 Rt2 Rn Rt): the
/// load-linked/store-conditional loops an ARMv8.0 build makes of every atomic.
fn is_exclusive(w: u32) -> bool {
    w & 0x3FA0_0000 == 0x0800_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(words: &[u32]) -> AtomicInstructions {
        let code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut c = AtomicInstructions::default();
        count_aarch64_atomics(&code, &mut c);
        c
    }

    // Encodings as GNU as assembles them (aarch64-linux-gnu-as -march=armv8.1-a).
    const CASAL_W: u32 = 0x88e0_fc41; // casal w0, w1, [x2]
    const LDADDAL_X: u32 = 0xf8e0_0041; // ldaddal x0, x1, [x2]
    const SWPAL_B: u32 = 0x38e0_8041; // swpalb w0, w1, [x2]
    const STADD_W: u32 = 0xb820_005f; // stadd w0, [x2]
    const LDAXR_W: u32 = 0x885f_fc01; // ldaxr w1, [x0]
    const STLXR_W: u32 = 0x8802_fc01; // stlxr w2, w1, [x0]
    const LDAR_W: u32 = 0x88df_fc01; // ldar w1, [x0]: ordered, not an atomic RMW
    const LDAPR_W: u32 = 0xb8bf_c001; // ldapr w1, [x0]: RCpc load, not LSE
    const NOP: u32 = 0xd503_201f;

    #[test]
    fn tells_lse_from_exclusives() {
        let c = count(&[CASAL_W, LDADDAL_X, SWPAL_B, STADD_W, NOP]);
        assert_eq!((c.lse, c.exclusive), (4, 0));
        let c = count(&[LDAXR_W, STLXR_W, NOP, LDAR_W, LDAPR_W]);
        assert_eq!((c.lse, c.exclusive), (0, 2));
    }

    #[test]
    fn not_elf_is_said() {
        assert_eq!(read_build(b"#!/bin/sh\n"), Err(BinaryError::NotElf));
        assert_eq!(read_build(&[]), Err(BinaryError::NotElf));
    }

    #[test]
    fn reads_this_test_binary() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let b = read_build(&exe).unwrap();
        assert_eq!(b.machine, std::env::consts::ARCH);
        assert_eq!(b.atomics.is_some(), std::env::consts::ARCH == "aarch64");
    }
}
