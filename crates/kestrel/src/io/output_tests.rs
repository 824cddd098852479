use super::*;
use std::io::Write;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn an_output_name_of_255_bytes_works() {
    let d = tmp();
    let name = format!("{}.csv", "n".repeat(251));
    assert_eq!(name.len(), 255);
    let p = d.path().join(&name);
    write_atomic(&p, |w| w.write_all(b"x")).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"x");
    assert_eq!(names(d.path()), vec![name]);
}

#[test]
fn a_planted_link_is_not_followed() {
    // Whatever links sit in the directory, the temporary is a fresh file: the target of
    // a link is never written.
    let d = tmp();
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    for i in 0..32 {
        std::os::unix::fs::symlink(&victim, d.path().join(format!(".o.csv.{i}.tmp"))).unwrap();
    }
    write_atomic(&d.path().join("o.csv"), |w| w.write_all(b"new")).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert_eq!(std::fs::read(d.path().join("o.csv")).unwrap(), b"new");
}

#[test]
fn a_plan_renames_all_or_nothing() {
    let d = tmp();
    let (a, b) = (d.path().join("a.csv"), d.path().join("b.csv"));
    std::fs::write(&a, b"old a").unwrap();
    {
        let plan = Outputs::plan(&[], &[&a, &b]).unwrap();
        write_atomic(&a, |w| w.write_all(b"new a")).unwrap();
        // Written but not committed: the old file is still in place.
        assert_eq!(std::fs::read(&a).unwrap(), b"old a");
        let e = write_atomic(&b, |_| Err(std::io::Error::other("disk full"))).unwrap_err();
        assert!(matches!(e, Error::Write { .. }), "{e}");
        drop(plan);
    }
    assert_eq!(std::fs::read(&a).unwrap(), b"old a");
    assert_eq!(names(d.path()), vec!["a.csv"]);

    let plan = Outputs::plan(&[], &[&a, &b]).unwrap();
    write_atomic(&a, |w| w.write_all(b"new a")).unwrap();
    write_atomic(&b, |w| w.write_all(b"new b")).unwrap();
    plan.commit().unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), b"new a");
    assert_eq!(std::fs::read(&b).unwrap(), b"new b");
    assert_eq!(names(d.path()), vec!["a.csv", "b.csv"]);
}

#[test]
fn outputs_that_are_inputs_or_each_other_are_refused() {
    let d = tmp();
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let z = d.path().join("z.csv");
    std::fs::write(&z, b"input").unwrap();
    let dotted = sub.join("../z.csv");
    let e = check_paths(&[&z], &[&dotted]).unwrap_err().to_string();
    assert!(e.contains("the output is the input"), "{e}");
    let hard = d.path().join("hard.csv");
    std::fs::hard_link(&z, &hard).unwrap();
    assert!(check_paths(&[&z], &[&hard]).is_err());
    let soft = d.path().join("soft.csv");
    std::os::unix::fs::symlink(&z, &soft).unwrap();
    assert!(check_paths(&[&soft], &[&z]).is_err());
    let e = check_paths(&[], &[&z, &dotted]).unwrap_err().to_string();
    assert!(e.contains("two outputs"), "{e}");
    assert!(check_paths(&[], &[&z, &hard]).is_err());
    assert!(check_paths(&[&z], &[&d.path().join("other.csv")]).is_ok());
    let e = check_paths(&[], &[&d.path().join("absent/o.csv")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("directory"), "{e}");
    assert!(check_paths(&[], &[&sub]).is_err());
    assert_eq!(std::fs::read(&z).unwrap(), b"input");
    for e in [
        check_paths(&[&z], &[&dotted]).unwrap_err(),
        check_paths(&[], &[&sub]).unwrap_err(),
    ] {
        assert!(e.is_bad_input(), "{e}");
    }
}

#[test]
fn the_latch_reports_the_first_error_once_and_then_swallows() {
    struct Full(usize);
    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 + b.len() > 10 {
                return Err(std::io::Error::from_raw_os_error(28));
            }
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut l = Latch::new(Full(0));
    l.write_all(b"12345").unwrap();
    assert!(l.write_all(b"1234567").is_err());
    l.write_all(b"anything").unwrap();
    l.flush().unwrap();
    assert_eq!(l.take_error().unwrap().raw_os_error(), Some(28));
}

#[test]
fn fsync_writes_the_same_bytes() {
    let d = tmp();
    let p = d.path().join("o.bin");
    set_fsync(true);
    let r = write_atomic(&p, |w| w.write_all(&[7u8; 1000]));
    set_fsync(false);
    r.unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 1000]);
}
