//! Threads that stay awake across a filter's steps: a step's parallel pass is handed to
//! them by counters they are already watching, not by waking sleeping threads.
//!
//! A filter of few particles (10^4: about 100 us a step on two cores) forks and joins
//! once a step. On the pool's workers, ten two-thread runs of the same input on the
//! 2-core virtual machine spread from 4.7e7 to 8.7e7 particle-steps/s (one-thread runs
//! within 2%): a worker that went to sleep in the step's serial part was woken late, or
//! on the core of the thread that woke it, and then two threads ran no faster than one.
//! Here:
//!
//! - the helpers spin while they wait (then yield to the scheduler between looks, so
//!   that a waiting thread gives its core to any other that needs it), for as long as
//!   the filter runs;
//! - each thread is bound to a core of its own when the process may use that many (the
//!   caller to the core it is on, and back to its former set afterwards): 7.6e7 to
//!   8.5e7 in the same test;
//! - each thread first takes a contiguous share of the tasks, the same share every
//!   step, so that a chunk's particles stay in the cache of the core that moved them
//!   last step, then what is left of the others' shares (10^4 particles: 8.1e7 -> 8.5e7,
//!   medians of 15).
//!
//! Written here because the pool of `rayon` puts idle workers to sleep and has no
//! setting that keeps them awake or binds them.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

type Task<'a> = dyn Fn(usize) + Sync + 'a;

/// Spins of a waiting helper before it starts yielding to the scheduler between looks.
const SPINS: u32 = 1 << 14;

/// The caller and its helpers (see the module docs).
pub struct Crew {
    helpers: usize,
    /// Bumped by [`Crew::run`] to hand out a new pass.
    generation: AtomicUsize,
    /// The next task of each thread's share of the pass (see [`Crew::run`]).
    next: Vec<Padded>,
    /// Helpers done with the pass.
    left: AtomicUsize,
    quit: AtomicBool,
    /// The pass: its task and number of tasks, written only while every helper waits.
    pass: UnsafeCell<(*const Task<'static>, usize)>,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// The thread that made the crew, the only one that may hand out passes.
    owner: std::thread::ThreadId,
    /// A pass is under way (a task may not hand out another).
    busy: AtomicBool,
}

// SAFETY: `pass` is written by `run` only while no helper reads it (before the
// generation is bumped, after every helper has left the previous pass), and read by the
// helpers only between the two; the task it points to is `Sync`.
unsafe impl Sync for Crew {}

impl Crew {
    /// Runs `f` with a crew of `threads` (the caller and `threads - 1` helpers, started
    /// here and ended when `f` returns).
    pub fn with<R>(threads: usize, f: impl FnOnce(&Crew) -> R) -> R {
        let crew = Crew {
            helpers: threads.max(1) - 1,
            generation: AtomicUsize::new(0),
            next: (0..threads.max(1)).map(|_| Padded::default()).collect(),
            left: AtomicUsize::new(0),
            quit: AtomicBool::new(false),
            pass: UnsafeCell::new((std::ptr::null::<fn(usize)>() as *const Task<'static>, 0)),
            panic: Mutex::new(None),
            owner: std::thread::current().id(),
            busy: AtomicBool::new(false),
        };
        let cpus = placement(threads.max(1));
        let _restore = cpus.as_ref().and_then(|c| pin_caller(c[0]));
        std::thread::scope(|s| {
            for h in 0..crew.helpers {
                let cpu = cpus.as_ref().map(|c| c[h + 1]);
                let crew = &crew;
                s.spawn(move || {
                    if let Some(cpu) = cpu {
                        pin(cpu);
                    }
                    crew.help(h + 1)
                });
            }
            // The helpers end when `f` does, whether it returns or unwinds.
            struct Quit<'a>(&'a Crew);
            impl Drop for Quit<'_> {
                fn drop(&mut self) {
                    self.0.quit.store(true, Ordering::Release);
                }
            }
            let _quit = Quit(&crew);
            f(&crew)
        })
    }

    /// Threads of the crew, the caller included.
    pub fn threads(&self) -> usize {
        self.helpers + 1
    }

    /// Runs `task(i)` for `i` in `0..n` on the caller and the helpers; returns when all
    /// are done (a task's panic is raised again here, after the others have finished).
    /// Called by the thread that made the crew, one pass at a time, never from within a
    /// task: the helpers serve one pass at a time.
    pub fn run(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        assert_eq!(
            std::thread::current().id(),
            self.owner,
            "a crew's passes are handed out by the thread that made it"
        );
        assert!(
            !self.busy.swap(true, Ordering::Relaxed),
            "a crew's task may not hand out a pass"
        );
        struct Done<'a>(&'a AtomicBool);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        let _done = Done(&self.busy);
        if self.helpers == 0 {
            (0..n).for_each(task);
            return;
        }
        // SAFETY: every helper has left the previous pass (waited for below), so none
        // reads `pass` now; the task outlives the pass, which ends before `run` returns.
        unsafe {
            let t: *const Task<'_> = task;
            *self.pass.get() = (
                std::mem::transmute::<*const Task<'_>, *const Task<'static>>(t),
                n,
            );
        }
        for (t, c) in self.next.iter().enumerate() {
            c.0.store(self.share(t, n).0, Ordering::Relaxed);
        }
        self.left.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Release);
        let mine = catch_unwind(AssertUnwindSafe(|| self.work(0, task, n)));
        let mut spins = 0u32;
        while self.left.load(Ordering::Acquire) < self.helpers {
            pause(&mut spins);
        }
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if let Some(p) = self.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            resume_unwind(p);
        }
    }

    /// Runs `f(c, chunk c)` over the `size`-long chunks of `out` (the last may be
    /// shorter) as one pass.
    pub fn for_chunks<X: Send>(
        &self,
        out: &mut [X],
        size: usize,
        f: impl Fn(usize, &mut [X]) + Sync,
    ) {
        let n = out.len().div_ceil(size);
        let s = Shared::of(out);
        // SAFETY: the pass runs each chunk index once, so the chunks are disjoint.
        self.run(n, &|c| f(c, unsafe { s.chunk(c, size) }));
    }

    /// Thread `t`'s share of `n` tasks: a contiguous range, the same in every pass, so
    /// that a chunk's data stays in the cache of the core that worked on it last step.
    fn share(&self, t: usize, n: usize) -> (usize, usize) {
        let threads = self.threads();
        (t * n / threads, (t + 1) * n / threads)
    }

    /// Thread `t`'s tasks: its share, then whatever is left of the others'.
    fn work(&self, t: usize, task: &Task<'_>, n: usize) {
        let threads = self.threads();
        for o in 0..threads {
            let v = (t + o) % threads;
            let end = self.share(v, n).1;
            loop {
                let i = self.next[v].0.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    break;
                }
                task(i);
            }
        }
    }

    fn help(&self, t: usize) {
        let mut seen = 0usize;
        loop {
            let mut spins = 0u32;
            let g = loop {
                let g = self.generation.load(Ordering::Acquire);
                if g != seen {
                    break g;
                }
                if self.quit.load(Ordering::Acquire) {
                    return;
                }
                pause(&mut spins);
            };
            seen = g;
            // SAFETY: the generation was bumped after `pass` was written (Acquire above
            // pairs with its Release), and `run` does not return before this helper
            // has left the pass.
            let (task, n) = unsafe { *self.pass.get() };
            let task = unsafe { &*task };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.work(t, task, n))) {
                *self.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
            }
            self.left.fetch_add(1, Ordering::Release);
        }
    }
}

/// A mutable slice that the crew's threads cut into disjoint chunks.
pub(super) struct Shared<V> {
    ptr: *mut V,
    len: usize,
}

// SAFETY: each thread reaches only the chunks it was given (see `chunk`).
unsafe impl<V: Send> Sync for Shared<V> {}

impl<V> Shared<V> {
    pub(super) fn of(s: &mut [V]) -> Self {
        Shared {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    /// Chunk `c` of size `size` (the last may be shorter).
    ///
    /// # Safety
    ///
    /// No other reference to the chunk may be alive while the one returned is.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn chunk(&self, c: usize, size: usize) -> &mut [V] {
        let start = (c * size).min(self.len);
        let end = (start + size).min(self.len);
        // SAFETY: `start..end` lies inside the slice; exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), end - start) }
    }
}

/// Distinct CPUs for the crew's threads, the caller's current one first, when the
/// threads may run on at least that many.
#[cfg(target_os = "linux")]
fn placement(threads: usize) -> Option<Vec<usize>> {
    if threads < 2 {
        return None;
    }
    // SAFETY: a zeroed cpu_set_t is valid; the calls only fill it or read it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let mut cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        let here = libc::sched_getcpu();
        if let Some(i) = cpus.iter().position(|&c| here >= 0 && c == here as usize) {
            cpus.swap(0, i);
        }
        (cpus.len() >= threads).then(|| cpus[..threads].to_vec())
    }
}

#[cfg(not(target_os = "linux"))]
fn placement(_threads: usize) -> Option<Vec<usize>> {
    None
}

/// Binds the calling thread to `cpu`.
#[cfg(target_os = "linux")]
fn pin(cpu: usize) {
    // SAFETY: as in `placement`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(not(target_os = "linux"))]
fn pin(_cpu: usize) {}

/// The caller's CPUs, given back when dropped.
#[cfg(target_os = "linux")]
struct Restore(libc::cpu_set_t);

#[cfg(target_os = "linux")]
impl Drop for Restore {
    fn drop(&mut self) {
        // SAFETY: as in `placement`.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) };
    }
}

/// Binds the caller to `cpu` until the value returned is dropped.
#[cfg(target_os = "linux")]
fn pin_caller(cpu: usize) -> Option<Restore> {
    // SAFETY: as in `placement`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        pin(cpu);
        Some(Restore(set))
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_caller(_cpu: usize) -> Option<()> {
    None
}

/// An atomic counter alone in its cache lines (two, as the adjacent-line prefetcher
/// fetches them in pairs).
#[derive(Default)]
#[repr(align(128))]
struct Padded(AtomicUsize);

/// One wait: a spin, or after [`SPINS`] of them a yield to the scheduler (so that a
/// waiting thread gives its core to any other that needs it).
#[inline]
fn pause(spins: &mut u32) {
    if *spins < SPINS {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_in_every_pass() {
        for threads in [1, 2, 3] {
            Crew::with(threads, |crew| {
                assert_eq!(crew.threads(), threads);
                for pass in 0..200usize {
                    let n = pass % 37;
                    let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                    crew.run(n, &|i| {
                        hits[i].fetch_add(pass + 1, Ordering::Relaxed);
                    });
                    for (i, h) in hits.iter().enumerate() {
                        assert_eq!(
                            h.load(Ordering::Relaxed),
                            pass + 1,
                            "task {i} of pass {pass}"
                        );
                    }
                }
            });
        }
    }

    #[test]
    fn a_task_that_panics_is_raised_in_the_caller_after_the_pass() {
        let done = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            Crew::with(2, |crew| {
                crew.run(64, &|i| {
                    if i == 40 {
                        panic!("task 40");
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                })
            })
        }));
        assert!(r.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 63);
    }

    #[test]
    fn a_pass_from_another_thread_is_refused() {
        let r = catch_unwind(AssertUnwindSafe(|| {
            Crew::with(2, |crew| {
                let inner = AtomicUsize::new(0);
                std::thread::scope(|s| {
                    s.spawn(|| {
                        crew.run(1, &|_| {
                            inner.fetch_add(1, Ordering::Relaxed);
                        })
                    })
                    .join()
                })
            })
        }));
        // The other thread's call panicked (and joined as an error), before any task.
        assert!(matches!(r, Ok(Err(_))));
    }

    #[test]
    fn a_pass_from_within_a_task_is_refused() {
        for threads in [1, 2] {
            let r = catch_unwind(AssertUnwindSafe(|| {
                Crew::with(threads, |crew| crew.run(4, &|_| crew.run(1, &|_| ())))
            }));
            assert!(r.is_err(), "{threads} threads");
        }
    }
}
