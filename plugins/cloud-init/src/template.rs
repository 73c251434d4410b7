//! The join command template (`join_command`), such as
//! `node-agent join --token {token} --labels {labels} --node {request_id}`.
//!
//! The template is split into words when the configuration is read, the way
//! a shell would split it but without any expansion: whitespace separates
//! words, `'…'` keeps its content as it is, `"…"` keeps its content except
//! that `\"` and `\\` stand for `"` and `\`, and outside quotes `\` takes the
//! next character literally. Then, for each node, placeholders are replaced
//! inside the words (also inside quotes). A replaced value never splits or
//! joins words, whatever it contains: the rendered command is a list of
//! arguments that cloud-init runs without a shell interpreting the values.
//!
//! Placeholders: `{token}`, `{labels}`, `{request_id}`, `{owner}`,
//! `{instance_type}`, `{zone}`. `{{` and `}}` stand for `{` and `}`.

use std::fmt;

/// A value the template can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Var {
    /// `{token}`: the `join_token` secret.
    Token,
    /// `{labels}`: the node's labels as `k=v,k=v` (sorted by key).
    Labels,
    /// `{request_id}`: the request id.
    RequestId,
    /// `{owner}`: the host's owner id.
    Owner,
    /// `{instance_type}`: the instance type, or empty.
    InstanceType,
    /// `{zone}`: the zone, or empty.
    Zone,
}

impl Var {
    /// Every placeholder, with its name.
    pub const ALL: [(&'static str, Var); 6] = [
        ("token", Var::Token),
        ("labels", Var::Labels),
        ("request_id", Var::RequestId),
        ("owner", Var::Owner),
        ("instance_type", Var::InstanceType),
        ("zone", Var::Zone),
    ];

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Var(Var),
}

/// A parsed template: words made of text and placeholders.
#[derive(Clone, PartialEq, Eq)]
pub struct Template {
    words: Vec<Vec<Piece>>,
}

impl fmt::Debug for Template {
    /// The words with placeholders shown as `{name}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<String> = self
            .words
            .iter()
            .map(|w| {
                w.iter()
                    .map(|p| match p {
                        Piece::Text(t) => t.clone(),
                        Piece::Var(v) => {
                            let name = Var::ALL
                                .iter()
                                .find(|(_, x)| x == v)
                                .map_or("?", |(n, _)| n);
                            format!("{{{name}}}")
                        }
                    })
                    .collect()
            })
            .collect();
        f.debug_tuple("Template").field(&words).finish()
    }
}

/// The values placeholders are replaced with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Values<'a> {
    /// `{token}`.
    pub token: &'a str,
    /// `{labels}`.
    pub labels: &'a str,
    /// `{request_id}`.
    pub request_id: &'a str,
    /// `{owner}`.
    pub owner: &'a str,
    /// `{instance_type}`.
    pub instance_type: &'a str,
    /// `{zone}`.
    pub zone: &'a str,
}

impl Values<'_> {
    fn get(&self, var: Var) -> &str {
        match var {
            Var::Token => self.token,
            Var::Labels => self.labels,
            Var::RequestId => self.request_id,
            Var::Owner => self.owner,
            Var::InstanceType => self.instance_type,
            Var::Zone => self.zone,
        }
    }
}

/// Builds one word while parsing.
#[derive(Default)]
struct Word {
    pieces: Vec<Piece>,
    text: String,
    started: bool,
}

impl Word {
    fn push_char(&mut self, c: char) {
        self.started = true;
        self.text.push(c);
    }

    fn push_var(&mut self, v: Var) {
        self.started = true;
        if !self.text.is_empty() {
            self.pieces
                .push(Piece::Text(std::mem::take(&mut self.text)));
        }
        self.pieces.push(Piece::Var(v));
    }

    fn finish(&mut self, words: &mut Vec<Vec<Piece>>) {
        if self.started {
            if !self.text.is_empty() {
                self.pieces
                    .push(Piece::Text(std::mem::take(&mut self.text)));
            }
            words.push(std::mem::take(&mut self.pieces));
        }
        *self = Self::default();
    }
}

impl Template {
    /// Parses a template.
    ///
    /// # Errors
    /// What is wrong: an unknown or unterminated placeholder, a lone `}`,
    /// an unterminated quote, a trailing `\`, or no words at all.
    pub fn parse(text: &str) -> Result<Self, String> {
        #[derive(Clone, Copy, PartialEq)]
        enum Quote {
            None,
            Single,
            Double,
        }
        let mut words = Vec::new();
        let mut word = Word::default();
        let mut quote = Quote::None;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (_, '{') if chars.peek() == Some(&'{') => {
                    chars.next();
                    word.push_char('{');
                }
                (_, '}') if chars.peek() == Some(&'}') => {
                    chars.next();
                    word.push_char('}');
                }
                (_, '{') => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) if c.is_ascii_alphanumeric() || c == '_' => name.push(c),
                            _ => {
                                return Err(format!(
                                    "unterminated or malformed placeholder `{{{name}…`; placeholders are {}, and `{{{{` stands for `{{`",
                                    placeholder_list()
                                ));
                            }
                        }
                    }
                    let var = Var::parse(&name).ok_or_else(|| {
                        format!(
                            "unknown placeholder `{{{name}}}`; placeholders are {}",
                            placeholder_list()
                        )
                    })?;
                    word.push_var(var);
                }
                (_, '}') => {
                    return Err("a lone `}`; write `}}` for a literal `}`".to_string());
                }
                (Quote::None, c) if c.is_whitespace() => word.finish(&mut words),
                (Quote::None, '\'') => {
                    word.started = true;
                    quote = Quote::Single;
                }
                (Quote::None, '"') => {
                    word.started = true;
                    quote = Quote::Double;
                }
                (Quote::None, '\\') => match chars.next() {
                    Some(next) => word.push_char(next),
                    None => return Err("a trailing `\\` escapes nothing".to_string()),
                },
                (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::None,
                (Quote::Double, '\\') if matches!(chars.peek(), Some('"' | '\\')) => {
                    let next = chars.next().unwrap_or('\\');
                    word.push_char(next);
                }
                (_, c) => word.push_char(c),
            }
        }
        match quote {
            Quote::None => {}
            Quote::Single => return Err("unterminated `'` quote".to_string()),
            Quote::Double => return Err("unterminated `\"` quote".to_string()),
        }
        word.finish(&mut words);
        if words.is_empty() {
            return Err("the command has no words".to_string());
        }
        Ok(Self { words })
    }

    /// Whether the template uses `var`.
    #[must_use]
    pub fn uses(&self, var: Var) -> bool {
        self.words.iter().flatten().any(|p| *p == Piece::Var(var))
    }

    /// The command's arguments (the program first) with placeholders replaced.
    #[must_use]
    pub fn render(&self, values: &Values<'_>) -> Vec<String> {
        self.words
            .iter()
            .map(|w| {
                w.iter()
                    .map(|p| match p {
                        Piece::Text(t) => t.as_str(),
                        Piece::Var(v) => values.get(*v),
                    })
                    .collect()
            })
            .collect()
    }
}

fn placeholder_list() -> String {
    Var::ALL
        .iter()
        .map(|(n, _)| format!("{{{n}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values<'static> {
        Values {
            token: "tok.en",
            labels: "role=worker,wasmprov-owner=o1,wasmprov-request=r1",
            request_id: "r1",
            owner: "o1",
            instance_type: "m.large",
            zone: "",
        }
    }

    fn render(t: &str) -> Vec<String> {
        Template::parse(t).unwrap().render(&values())
    }

    #[test]
    fn placeholders_are_replaced_inside_words() {
        assert_eq!(
            render("node-agent join --token {token} --labels {labels} --node {request_id}"),
            [
                "node-agent",
                "join",
                "--token",
                "tok.en",
                "--labels",
                "role=worker,wasmprov-owner=o1,wasmprov-request=r1",
                "--node",
                "r1"
            ]
        );
        assert_eq!(
            render("agent --name={owner}-{request_id} --type={instance_type} --zone={zone}"),
            ["agent", "--name=o1-r1", "--type=m.large", "--zone="]
        );
        // An empty value alone is still one (empty) argument.
        assert_eq!(render("agent {zone}"), ["agent", ""]);
    }

    #[test]
    fn quotes_and_escapes_group_words_without_expanding_anything() {
        assert_eq!(
            render(r#"sh -c 'echo $HOME; join {token}' "a \"b\" \\c" d\ e '' x"#),
            [
                "sh",
                "-c",
                "echo $HOME; join tok.en",
                r#"a "b" \c"#,
                "d e",
                "",
                "x"
            ]
        );
        assert_eq!(render("a  \t b\n c"), ["a", "b", "c"]);
        assert_eq!(render(r#"say "{{x}}" }}"#), ["say", "{x}", "}"]);
        assert_eq!(render(r#"p "x\n""#), ["p", r"x\n"]);
    }

    #[test]
    fn values_never_split_or_join_words() {
        let t = Template::parse("join {labels} {token}").unwrap();
        let v = Values {
            labels: "a=b c; rm -rf / 'q' \"",
            token: "$(reboot)",
            ..values()
        };
        assert_eq!(
            t.render(&v),
            ["join", "a=b c; rm -rf / 'q' \"", "$(reboot)"]
        );
    }

    #[test]
    fn bad_templates_say_why() {
        for (bad, why) in [
            ("agent {nope}", "unknown placeholder `{nope}`"),
            ("agent {token", "unterminated"),
            ("agent {to ken}", "malformed"),
            ("agent }", "lone"),
            ("agent 'x", "unterminated `'`"),
            ("agent \"x", "unterminated `\"`"),
            ("agent \\", "trailing"),
            ("   ", "no words"),
            ("", "no words"),
        ] {
            let err = Template::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        let err = Template::parse("x {nope}").unwrap_err();
        assert!(err.contains("{token}") && err.contains("{zone}"), "{err}");
    }

    #[test]
    fn uses_reports_placeholders() {
        let t = Template::parse("agent --token={token}").unwrap();
        assert!(t.uses(Var::Token));
        assert!(!t.uses(Var::Labels));
        assert!(
            !Template::parse("agent '{{token}}'")
                .unwrap()
                .uses(Var::Token)
        );
        assert_eq!(
            format!("{:?}", Template::parse("a --t={token}").unwrap()),
            r#"Template(["a", "--t={token}"])"#
        );
    }
}
