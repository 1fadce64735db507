//! Reading and writing profile files, with format and version checks.

use crate::model::Profile;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};

/// The `format` field every pepper profile carries.
pub const FORMAT: &str = "pepper-profile";
/// The current format version. Readers refuse newer versions instead of misreading them.
/// Version 2 added PEP mode and `sampling`, version 3 `contexts`; older files still read.
pub const VERSION: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("not a pepper profile: {0}")]
    NotAProfile(String),
    #[error("profile format version {found} is newer than this pepper understands ({VERSION}); upgrade pepper")]
    TooNew { found: u32 },
    #[error("profile was recorded for module {expected}, but the module given has hash {found}")]
    ModuleMismatch { expected: String, found: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Lowercase hex SHA-256 of a module.
pub fn module_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Profile {
    pub fn write(&self, mut w: impl Write) -> Result<(), ProfileError> {
        serde_json::to_writer(&mut w, self).map_err(std::io::Error::from)?;
        w.write_all(b"\n")?;
        Ok(())
    }

    /// Reads a profile, checking the format tag and version before trusting the contents.
    pub fn read(mut r: impl Read) -> Result<Profile, ProfileError> {
        let mut text = String::new();
        r.read_to_string(&mut text)?;
        // Only the header first: a newer version may not fit today's structs at all.
        #[derive(serde::Deserialize)]
        struct Header {
            format: Option<String>,
            version: Option<u32>,
        }
        let header: Header = serde_json::from_str(&text)
            .map_err(|e| ProfileError::NotAProfile(format!("invalid JSON: {e}")))?;
        if header.format.as_deref() != Some(FORMAT) {
            return Err(ProfileError::NotAProfile(format!(
                "missing \"format\": \"{FORMAT}\""
            )));
        }
        let version = header.version.unwrap_or(0);
        if version > VERSION {
            return Err(ProfileError::TooNew { found: version });
        }
        serde_json::from_str(&text).map_err(|e| ProfileError::NotAProfile(e.to_string()))
    }

    /// Refuses to go on when `module` is not the module this profile was recorded from.
    pub fn check_module(&self, module: &[u8]) -> Result<(), ProfileError> {
        let found = module_hash(module);
        if found != self.module.sha256 {
            return Err(ProfileError::ModuleMismatch {
                expected: self.module.sha256.clone(),
                found,
            });
        }
        Ok(())
    }
}
