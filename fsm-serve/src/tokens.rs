//! Who calls: bearer tokens from a TOML file, each naming an actor and its roles.
//!
//! ```toml
//! [[token]]
//! token = "a long random secret"
//! actor = "ops"
//! roles = ["admin"]
//! ```

use std::path::Path;

use fsm_core::Machine;
use fsm_runtime::Actor;
use serde::Deserialize;
use subtle::ConstantTimeEq;

/// The shortest token accepted: a guessable token is no token.
pub const MIN_TOKEN_LEN: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    token: String,
    actor: String,
    #[serde(default)]
    roles: Vec<String>,
}

/// The tokens a service accepts.
pub struct Tokens {
    entries: Vec<(Vec<u8>, Actor)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        let actors: Vec<&str> = self.entries.iter().map(|(_, a)| a.name()).collect();
        f.debug_struct("Tokens").field("actors", &actors).finish()
    }
}

impl Tokens {
    /// Reads a tokens file, refusing one that other users may read (on Unix), a
    /// malformed one (with its line and column), a token shorter than
    /// [`MIN_TOKEN_LEN`] and a token given twice. Messages never hold a token.
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let shown = path.display();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)
                .map_err(|e| format!("cannot read the tokens file {shown}: {e}"))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(format!(
                    "the tokens file {shown} can be read by other users (mode {:o}): \
                     restrict it to its owner (chmod 600 {shown})",
                    mode & 0o777
                ));
            }
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the tokens file {shown}: {e}"))?;
        Tokens::parse(&text).map_err(|e| format!("{shown}: {e}"))
    }

    /// Reads a tokens file's text.
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let file: File = toml::from_str(text).map_err(|e| {
            // toml's message quotes the offending line, which may hold a token:
            // give the position and the reason only.
            let at = e
                .span()
                .map(|span| {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                    format!("line {line}, column {column}: ")
                })
                .unwrap_or_default();
            format!("{at}{}", e.message())
        })?;
        if file.token.is_empty() {
            return Err("no `[[token]]` entry: nobody could call the service".into());
        }
        let mut entries: Vec<(Vec<u8>, Actor)> = Vec::new();
        for (i, entry) in file.token.into_iter().enumerate() {
            let n = i + 1;
            if entry.token.len() < MIN_TOKEN_LEN {
                return Err(format!(
                    "token {n} (actor {}) is shorter than {MIN_TOKEN_LEN} characters",
                    entry.actor
                ));
            }
            if entry.actor.is_empty() {
                return Err(format!("token {n} names no actor"));
            }
            if entries.iter().any(|(t, _)| *t == entry.token.as_bytes()) {
                return Err(format!("token {n} (actor {}) is given twice", entry.actor));
            }
            let actor = entry
                .roles
                .iter()
                .fold(Actor::new(entry.actor), |a, r| a.with_role(r));
            entries.push((entry.token.into_bytes(), actor));
        }
        Ok(Tokens { entries })
    }

    /// The actor a presented token stands for. Every entry is compared, in
    /// constant time, whatever matches.
    pub fn actor(&self, presented: &str) -> Option<Actor> {
        let presented = presented.as_bytes();
        let mut found = None;
        for (token, actor) in &self.entries {
            if bool::from(token.as_slice().ct_eq(presented)) {
                found = Some(actor.clone());
            }
        }
        found
    }

    /// Each role a token holds that none of `machines` declares, as a line to
    /// warn with (no token in it): such a role grants nothing on this
    /// service, and is most often a typo. The closest role any of `machines`
    /// declares is suggested, if one is close.
    pub fn undeclared_roles<'m>(
        &self,
        machines: impl IntoIterator<Item = &'m Machine>,
    ) -> Vec<String> {
        let machines: Vec<&Machine> = machines.into_iter().collect();
        let mut lines = Vec::new();
        for (n, (_, actor)) in self.entries.iter().enumerate() {
            let undeclared = (actor.roles()).filter(|&role| {
                !machines
                    .iter()
                    .any(|m| m.roles().iter().any(|r| &*r.name == role))
            });
            for role in undeclared {
                let declared = (machines.iter()).flat_map(|m| m.roles().iter().map(|r| &*r.name));
                let hint = fsm_model::suggest(role, declared)
                    .map(|close| format!("; did you mean `{close}`?"))
                    .unwrap_or_default();
                lines.push(format!(
                    "token {} (actor {}) holds the role `{role}`, which no machine of \
                     this service declares: it grants nothing here{hint}",
                    n + 1,
                    actor.name()
                ));
            }
        }
        lines
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none (a tokens file may list none: every call is
    /// then refused).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_and_found() {
        let tokens = Tokens::parse(
            r#"
            [[token]]
            token = "0123456789abcdef-ops"
            actor = "ops"
            roles = ["admin", "controller"]
            [[token]]
            token = "0123456789abcdef-user"
            actor = "user"
            "#,
        )
        .unwrap();
        let ops = tokens.actor("0123456789abcdef-ops").unwrap();
        assert_eq!(ops.name(), "ops");
        assert_eq!(ops.roles().collect::<Vec<_>>(), ["admin", "controller"]);
        assert!(tokens.actor("0123456789abcdef-op").is_none());
        assert!(tokens.actor("").is_none());
        assert!(!format!("{tokens:?}").contains("0123456789"));
    }

    /// A role no served machine declares is named, with the closest declared
    /// role when one is close; a role some machine declares is not, nor is
    /// any token.
    #[test]
    fn roles_no_machine_declares_are_named() {
        let spec = |name: &str, roles: &str| {
            let text = format!(
                "[machine]\nname = \"{name}\"\ninitial = \"A\"\n[roles]\n{roles}\n\
                 [states]\nA = {{}}\nB = {{ terminal = true }}\n\
                 [actions]\ngo = {{ from = \"A\", to = \"B\" }}\n"
            );
            fsm_core::spec::load_str(format!("{name}.toml"), text).unwrap()
        };
        let door = spec("door", "keeper = \"Holds the keys\"\nuser = \"Uses it\"");
        let gate = spec("gate", "guard = \"Watches the gate\"");
        let tokens = Tokens::parse(
            r#"
            [[token]]
            token = "0123456789abcdef-ops"
            actor = "ops"
            roles = ["admin", "keeper", "guard"]
            [[token]]
            token = "0123456789abcdef-alice"
            actor = "alice"
            roles = ["usr"]
            "#,
        )
        .unwrap();
        let lines = tokens.undeclared_roles([&door, &gate]);
        assert_eq!(
            lines,
            [
                "token 1 (actor ops) holds the role `admin`, which no machine of this \
                 service declares: it grants nothing here",
                "token 2 (actor alice) holds the role `usr`, which no machine of this \
                 service declares: it grants nothing here; did you mean `user`?",
            ]
        );
        // `guard` is the gate's: served without it, the ops token's is named too.
        assert_eq!(tokens.undeclared_roles([&door]).len(), 3);
        // The suggestion is the closest over every machine, not the first
        // machine's close one: `keeperss` is two edits from the door's
        // `keeper`, one from the vault's `keepers`.
        let vault = spec("vault", "keepers = \"Hold the vault's keys\"");
        let typo = Tokens::parse(
            "[[token]]\ntoken = \"0123456789abcdef-k\"\nactor = \"k\"\nroles = [\"keeperss\"]\n",
        )
        .unwrap();
        assert_eq!(
            typo.undeclared_roles([&door, &vault]),
            [
                "token 1 (actor k) holds the role `keeperss`, which no machine of this \
              service declares: it grants nothing here; did you mean `keepers`?"
            ]
        );
        assert!(
            tokens
                .undeclared_roles([&door, &gate])
                .iter()
                .all(|l| !l.contains("0123456789"))
        );
    }

    #[test]
    fn bad_files_say_why_without_the_token() {
        let err = |t: &str| Tokens::parse(t).err().unwrap();
        assert_eq!(
            err("[[token]]\ntoken = \"short\"\nactor = \"a\"\n"),
            "token 1 (actor a) is shorter than 16 characters"
        );
        assert_eq!(
            err(""),
            "no `[[token]]` entry: nobody could call the service"
        );
        let twice = "[[token]]\ntoken = \"0123456789abcdefgh\"\nactor = \"a\"\n[[token]]\ntoken = \"0123456789abcdefgh\"\nactor = \"b\"\n";
        assert_eq!(err(twice), "token 2 (actor b) is given twice");
        let typo = err("[[token]]\ntoken = \"0123456789abcdefgh-secret\"\nactr = \"a\"\n");
        assert!(typo.starts_with("line 3, column 1: "), "{typo}");
        assert!(!typo.contains("secret"), "{typo}");
    }
}
