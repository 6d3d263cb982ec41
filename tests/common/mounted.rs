//! Files of a Secret or ConfigMap mounted the kubelet's way: each version in a timestamped
//! folder, `..data` pointing at the current one, and a link through it for each file.

use std::path::Path;

/// Writes `files` (name, content) into the folder `dir/version`.
pub fn write_files(dir: &Path, version: &str, files: &[(&str, &str)]) {
    let folder = dir.join(version);
    std::fs::create_dir(&folder).unwrap();
    for (name, content) in files {
        std::fs::write(folder.join(name), content).unwrap();
    }
}

/// Makes `dir` show `version`, with a link through `..data` for each of `names`; returns their
/// paths.
pub fn mount_files<const N: usize>(dir: &Path, version: &str, names: [&str; N]) -> [String; N] {
    swap_data(dir, version);
    names.map(|name| {
        std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        dir.join(name).to_str().unwrap().to_owned()
    })
}

/// Points `..data` at `version` atomically (symlink to a temporary name, then rename).
pub fn swap_data(dir: &Path, version: &str) {
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}
