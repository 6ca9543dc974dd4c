//! The seccomp filter of a sandboxed server: system calls no MCP server needs, that reach into other processes or the
//! kernel, fail with `EPERM` (ptrace, mounts, namespaces, BPF, kexec, keyrings, perf events, modules, ...); `clone3`
//! fails with `ENOSYS` (its flags cannot be inspected, so libc falls back to `clone`, whose namespace flags are refused).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// `kexec_file_load`: the libc crate does not name it for musl on aarch64, where it is the generic system call table's
/// 294.
#[cfg(target_arch = "aarch64")]
const SYS_KEXEC_FILE_LOAD: libc::c_long = 294;
#[cfg(not(target_arch = "aarch64"))]
const SYS_KEXEC_FILE_LOAD: libc::c_long = libc::SYS_kexec_file_load;

/// Refused outright.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    SYS_KEXEC_FILE_LOAD,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_userfaultfd,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `clone` flags that would make a namespace (each refused).
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

fn arch() -> Result<TargetArch, String> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp: unsupported architecture: {e:?}"))
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: u32) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch()?,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    filter.try_into().map_err(|e| format!("seccomp: {e:?}"))
}

/// The two programs: the `EPERM` list (with `clone`'s namespace flags), and `clone3` as `ENOSYS`.
// System call numbers are `c_long`, which is `i64` only on 64-bit targets: the casts are needed elsewhere.
#[allow(clippy::unnecessary_cast)]
pub fn programs() -> Result<[BpfProgram; 2], String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&n| (n as i64, vec![])).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let cond = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag as u64),
                flag as u64,
            )
            .map_err(|e| format!("seccomp: {e}"))?;
            SeccompRule::new(vec![cond]).map_err(|e| format!("seccomp: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    rules.insert(libc::SYS_clone as i64, clone_rules);
    let denied = compile(rules, libc::EPERM as u32)?;
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3 as i64, vec![])]),
        libc::ENOSYS as u32,
    )?;
    Ok([denied, clone3])
}

/// Installs both programs on this thread (and so on every process it starts). `no_new_privs` is already set.
pub fn install() -> Result<(), String> {
    for program in programs()? {
        seccompiler::apply_filter(&program)
            .map_err(|e| format!("cannot install the seccomp filter: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_programs_compile_for_this_machine() {
        let [denied, clone3] = programs().unwrap();
        assert!(
            denied.len() > DENIED.len(),
            "one check per refused call at least"
        );
        assert!(!clone3.is_empty());
    }
}
