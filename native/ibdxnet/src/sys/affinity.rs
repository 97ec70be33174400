//! CPU affinity of the calling thread (`sched_getaffinity`,
//! `sched_setaffinity`), for the engine's `pin_threads`.

use std::io;

/// Largest CPU number a `cpu_set_t` holds (the kernel takes larger sets,
/// but no host this engine runs on has more CPUs).
pub const MAX_CPU: usize = libc::CPU_SETSIZE as usize - 1;

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all-zero bits are the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a live cpu_set_t of the size passed.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: every index is below CPU_SETSIZE, inside `set`.
    Ok((0..=MAX_CPU).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect())
}

/// Restricts the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu > MAX_CPU {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is at most MAX_CPU (checked above), inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a live cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `cpus` (ascending) as the kernel lists them: `0-3,6`.
pub fn list_text(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_the_kernel_writes_them() {
        assert_eq!(list_text(&[]), "");
        assert_eq!(list_text(&[0]), "0");
        assert_eq!(list_text(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
    }

    /// Pins a fresh thread to the first allowed CPU and reads it back.
    #[test]
    fn a_pinned_thread_runs_only_on_its_cpu() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let cpu = *allowed.last().unwrap();
        let seen = std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            allowed_cpus().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(seen, vec![cpu]);
        assert_eq!(allowed_cpus().unwrap(), allowed, "only the pinned thread changed");
        assert_eq!(pin_current_thread(MAX_CPU + 1).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }
}
