//! SQL for profiles: one row per profile, its definition (the JSON of `Profile`: servers, tool globs, overrides) kept
//! whole; what a profile means is `ad_core::profile`'s.

use super::db::now_text;
use super::{Store, to_json};
use crate::args;
use ad_core::error::{Error, Result};
use ad_core::profile::Profile;

fn parse(name: &str, json: &str) -> Result<Profile> {
    serde_json::from_str(json).map_err(|e| Error::Internal(format!("stored profile `{name}`: {e}")))
}

impl Store {
    /// Every profile, by name.
    pub fn profiles(&self) -> Result<Vec<Profile>> {
        let rows = self.read(|c| c.query("SELECT name, spec FROM profiles ORDER BY name", &[]))?;
        rows.iter()
            .map(|r| parse(&r.get::<String>(0)?, &r.get::<String>(1)?))
            .collect()
    }

    /// One profile, `None` when there is none of that name.
    pub fn profile(&self, name: &str) -> Result<Option<Profile>> {
        let row =
            self.read(|c| c.query_opt("SELECT spec FROM profiles WHERE name = ?1", &args![name]))?;
        row.map(|r| parse(name, &r.get::<String>(0)?)).transpose()
    }

    /// Stores a profile, replacing one of the same name; true when it was new.
    pub fn put_profile(&self, profile: &Profile) -> Result<bool> {
        let json = to_json(profile)?;
        self.write(|c| {
            let existed = c
                .query_opt("SELECT 1 FROM profiles WHERE name = ?1", &args![&profile.name])?
                .is_some();
            c.execute(
                "INSERT INTO profiles (name, spec, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at",
                &args![&profile.name, &json, &now_text()],
            )?;
            Ok(!existed)
        })
    }

    /// Removes a profile; false when there was none.
    pub fn delete_profile(&self, name: &str) -> Result<bool> {
        self.write(|c| Ok(c.execute("DELETE FROM profiles WHERE name = ?1", &args![name])? > 0))
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use ad_core::profile::Profile;

    #[test]
    fn profiles_round_trip_replace_and_go() {
        let store = Store::open_in_memory().unwrap();
        assert!(store.profiles().unwrap().is_empty());
        let mut p = Profile {
            name: "dev".into(),
            servers: vec!["fs".into()],
            tools: vec!["github__*_issue".into()],
            ..Profile::default()
        };
        assert!(store.put_profile(&p).unwrap());
        assert_eq!(store.profile("dev").unwrap(), Some(p.clone()));
        p.description = "coding".into();
        p.overrides = serde_json::json!({"fs__read_file": {"description": "Read one file"}});
        assert!(!store.put_profile(&p).unwrap());
        assert_eq!(store.profiles().unwrap(), vec![p]);
        assert!(store.delete_profile("dev").unwrap());
        assert!(!store.delete_profile("dev").unwrap());
        assert_eq!(store.profile("dev").unwrap(), None);
    }
}
