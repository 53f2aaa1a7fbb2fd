//! The shipped recordings (`recordings/*.baro`) as the proof that the codec's bytes do not
//! move: each is read and written again, and the new bytes must be the file's own.

use std::path::PathBuf;

use super::{Reader, Writer};

fn shipped() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../recordings");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "baro"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_recording_re_encodes_to_its_own_bytes() {
    let files = shipped();
    assert!(files.len() >= 8, "shipped recordings: {files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let mut r = Reader::new(std::io::Cursor::new(&bytes[..])).unwrap();
        let mut w = Writer::new(Vec::with_capacity(bytes.len()), r.header()).unwrap();
        for msg in r.by_ref() {
            w.write(&msg.unwrap()).unwrap();
        }
        assert!(r.finished(), "{}: not finished", path.display());
        let again = w.finish().unwrap();
        let first_difference = bytes.iter().zip(&again).position(|(a, b)| a != b);
        assert!(
            again == bytes,
            "{}: {} bytes written again, {} in the file, first difference at {first_difference:?}",
            path.display(),
            again.len(),
            bytes.len()
        );
    }
}
