//! Names a captured stack's frames in a child process. Naming parses the
//! binary's debug information: done in the broker, it grew the broker's
//! resident memory by about 130 MiB (mapped debug sections and the parse)
//! the first time a hold was logged, past the bounds its memory is sized by
//! (`tests/memory.rs`). The namer starts the broker's own executable as a
//! child (`serve_if_asked` in its `main`) and lets it go when idle, so the
//! broker's memory stays within its named bounds and the parse's memory is
//! the kernel's again once the child exits.
//!
//! The broker turns each frame's address into its object file and the
//! address in that file (the same in every process: ASLR moves only the
//! load bias); the child names it from the file, inlined calls included.

use addr2line::Loader;
use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set in the child's environment: the process names frames and exits.
const CHILD_ENV: &str = "RINGMQ_STACK_NAMER";

/// Whether this process's `main` called `serve_if_asked`, so that its
/// executable started as a child names frames (a test binary would run its
/// tests instead).
static CAN_NAME: AtomicBool = AtomicBool::new(false);

/// One frame to name: the object file holding it and its address there.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub file: String,
    pub address: u64,
}

/// Where each frame's code is: its object file (the main executable as
/// `/proc/PID/exe`, which names it even once replaced on disk) and its
/// address in that file. The address is the call's, one byte before the
/// return address a frame holds, so a call at a function's end names that
/// function. None for a frame in no loaded file (the vDSO, a bad address).
pub fn locate(ips: &[usize]) -> Vec<Option<Located>> {
    let objects = loaded_objects();
    let main = format!("/proc/{}/exe", std::process::id());
    ips.iter()
        .map(|&ip| {
            let at = ip.checked_sub(1)?;
            let object = objects.iter().find(|o| o.segments.iter().any(|s| s.contains(&at)))?;
            let file = if object.name.is_empty() { main.clone() } else { object.name.clone() };
            Some(Located { file, address: (at - object.bias) as u64 })
        })
        .collect()
}

/// A loaded object: its name (empty for the main executable), load bias
/// and mapped segments.
struct Object {
    name: String,
    bias: usize,
    segments: Vec<std::ops::Range<usize>>,
}

fn loaded_objects() -> Vec<Object> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info for this call, and
        // `data` is the Vec given below.
        let (info, objects) = unsafe { (&*info, &mut *(data as *mut Vec<Object>)) };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null dlpi_name is a NUL-terminated string.
            unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
        };
        let bias = info.dlpi_addr as usize;
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let segments = headers
            .iter()
            .filter(|h| h.p_type == libc::PT_LOAD)
            .map(|h| bias + h.p_vaddr as usize..bias + (h.p_vaddr + h.p_memsz) as usize)
            .collect();
        objects.push(Object { name, bias, segments });
        0
    }
    let mut objects: Vec<Object> = Vec::new();
    // SAFETY: `each` only reads the headers it is given and pushes to the Vec.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut objects as *mut Vec<Object> as *mut c_void) };
    objects
}

/// Object files' debug information, parsed once each.
#[derive(Default)]
pub struct Files {
    loaded: HashMap<String, Option<Loader>>,
}

impl Files {
    /// The names at `address` of `file`, innermost inlined call first; the
    /// symbol table's name where there is no debug information; empty if
    /// the file holds neither.
    pub fn names(&mut self, file: &str, address: u64) -> Vec<String> {
        let loader = self.loaded.entry(file.to_string()).or_insert_with(|| Loader::new(file).ok());
        let Some(loader) = loader else { return Vec::new() };
        let mut names = Vec::new();
        if let Ok(mut frames) = loader.find_frames(address) {
            while let Ok(Some(frame)) = frames.next() {
                if let Some(Ok(raw)) = frame.function.as_ref().map(|f| f.raw_name()) {
                    names.push(readable(&raw));
                }
            }
        }
        if names.is_empty() {
            names.extend(loader.find_symbol(address).map(readable));
        }
        names
    }
}

/// A symbol demangled, without its hash or generic arguments.
fn readable(raw: &str) -> String {
    without_generics(&format!("{:#}", rustc_demangle::demangle(raw)))
}

/// `name` without what its angle brackets hold (`drop_in_place<glommio::
/// sys::Source>` -> `drop_in_place`): a future's type spells out every
/// layer it is made of, a frame of a few kilobytes. A trait method's
/// `<Type as Trait>::f` keeps its brackets' start: `<..>::f`.
fn without_generics(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => {
                if depth == 0 && (out.is_empty() || out.ends_with("::")) {
                    out.push_str("<..>");
                }
                depth += 1;
            }
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A frame's names, or its address if it has none: every frame stays in
/// the stack (`stack_capture::interrupted` counts frames from the handler's).
fn or_address(names: Vec<String>, ip: usize) -> Vec<String> {
    if names.is_empty() {
        vec![format!("{ip:#x}")]
    } else {
        names
    }
}

/// The naming child: one request line per frame (`HEX_ADDRESS FILE`), one
/// answer line per frame (its names, tab-separated, possibly none).
pub struct Symbolizer {
    child: Child,
    requests: ChildStdin,
    answers: BufReader<ChildStdout>,
}

impl Symbolizer {
    /// Starts `program` (this process's executable in a broker) as the
    /// naming child. It inherits the calling thread's scheduling class.
    pub fn start(program: &Path) -> std::io::Result<Symbolizer> {
        if !CAN_NAME.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("this program's main does not name stacks (server::prepare_process)"));
        }
        let mut child = Command::new(program)
            .env(CHILD_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let requests = child.stdin.take().expect("piped");
        let answers = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Symbolizer { child, requests, answers })
    }

    /// The names of each frame (innermost first, inlined calls included),
    /// a frame the child cannot name as its address.
    pub fn name(&mut self, ips: &[usize]) -> std::io::Result<Vec<String>> {
        let located = locate(ips);
        let mut request = String::new();
        for frame in located.iter().flatten() {
            request.push_str(&format!("{:x} {}\n", frame.address, frame.file));
        }
        self.requests.write_all(request.as_bytes())?;
        self.requests.flush()?;
        let mut names = Vec::new();
        for (&ip, frame) in ips.iter().zip(&located) {
            let mut line = String::new();
            if frame.is_some() && self.answers.read_line(&mut line)? == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the stack namer exited"));
            }
            let line = line.trim_end_matches('\n');
            names.extend(or_address(line.split('\t').filter(|n| !n.is_empty()).map(String::from).collect(), ip));
        }
        Ok(names)
    }
}

impl Drop for Symbolizer {
    fn drop(&mut self) {
        // Its stdin closes with self; it exits at the end of its input.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Called first thing in a binary that runs a broker: started as the naming
/// child, the process answers its parent's frames and exits here.
pub fn serve_if_asked() {
    if std::env::var_os(CHILD_ENV).is_none() {
        CAN_NAME.store(true, Ordering::Relaxed);
        return;
    }
    let mut files = Files::default();
    let (input, mut output) = (std::io::stdin().lock(), std::io::stdout().lock());
    for line in input.lines() {
        let Ok(line) = line else { break };
        let names = line
            .split_once(' ')
            .and_then(|(hex, file)| Some(files.names(file, u64::from_str_radix(hex, 16).ok()?)))
            .unwrap_or_default();
        if writeln!(output, "{}", names.join("\t")).and_then(|_| output.flush()).is_err() {
            break;
        }
    }
    std::process::exit(0);
}

/// The frames' names parsed in this process, for tests (a broker's namer
/// asks its child).
#[cfg(test)]
pub fn named_here(ips: &[usize]) -> Vec<String> {
    let mut files = Files::default();
    let located = locate(ips);
    let names =
        |(ip, f): (&usize, Option<Located>)| or_address(f.map_or(Vec::new(), |f| files.names(&f.file, f.address)), *ip);
    ips.iter().zip(located).flat_map(names).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_names_lose_their_generic_arguments() {
        assert_eq!(without_generics("core::ptr::drop_in_place<glommio::sys::Source<u8>>"), "core::ptr::drop_in_place");
        assert_eq!(without_generics("<alloc::boxed::Box<F> as core::ops::FnOnce<()>>::call_once"), "<..>::call_once");
        assert_eq!(
            without_generics("glommio::executor::{impl#10}::spawn::{closure#0}"),
            "glommio::executor::{impl#10}::spawn::{closure#0}"
        );
        assert_eq!(without_generics("run<T>::{closure#0}<X>"), "run::{closure#0}");
    }

    #[inline(never)]
    fn a_function_with_a_name() -> usize {
        std::hint::black_box(7)
    }

    #[test]
    fn a_located_address_is_named_from_its_file() {
        // The function's first byte, as a return address just past it would give.
        let ip = a_function_with_a_name as *const () as usize + 1;
        let located = locate(&[ip, 1]);
        let frame = located[0].clone().expect("the function is in the test binary");
        assert_eq!(frame.file, format!("/proc/{}/exe", std::process::id()));
        assert_eq!(located[1], None, "address 0 is in no file");
        let names = Files::default().names(&frame.file, frame.address);
        assert!(names.iter().any(|n| n.ends_with("a_function_with_a_name")), "{names:?}");
    }

    #[test]
    fn a_program_whose_main_does_not_name_stacks_is_not_started() {
        // This test binary's main runs tests: started as the child, it would run them again.
        let refused = Symbolizer::start(Path::new("/proc/self/exe")).err().expect("refused");
        assert!(refused.to_string().contains("prepare_process"), "{refused}");
    }
}
