//! Walking the pages of a list call, whichever way the cloud pages:
//! page numbers (with the next page's number, the count of pages, or a
//! short last page), a next-page URL in the body, a `Link: <…>; rel="next"`
//! header, or an opaque token. Every walk is bounded ([`MAX_PAGES`]) and
//! stops with an error when the cloud names a page it already gave, so a
//! cloud (or a fault) that pages forever cannot hold a call.
//!
//! ```
//! use wasmprov_guest::http::{Request, Response};
//! use wasmprov_guest::pages::{walk, Paging};
//!
//! let paging = Paging::NextUrl { pointer: "/links/pages/next" };
//! let mut answers = vec![
//!     r#"{"droplets":[3],"links":{}}"#,
//!     r#"{"droplets":[1,2],"links":{"pages":{"next":"https://x/v2/droplets?page=2"}}}"#,
//! ];
//! let mut seen = Vec::new();
//! walk(Request::get("https://x/v2/droplets"), &paging, |req| {
//!     Ok(Response { status: 200, headers: vec![], body: answers.pop().unwrap().into(), url: req.url().into() })
//! }, |page| {
//!     seen.extend(page["droplets"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()));
//!     Ok(())
//! }).unwrap();
//! assert_eq!(seen, [1, 2, 3]);
//! ```

use std::collections::BTreeSet;

use crate::http::{Request, Response};
use crate::{Error, Result};

/// Most pages one walk reads.
pub const MAX_PAGES: usize = 1000;

/// How a cloud's list calls page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paging {
    /// One page holds everything.
    Single,
    /// `?<page>=N`, from page 1 (the list request sets the page size
    /// itself). The next page's number is the number at JSON pointer `next`
    /// (`null` or absent on the last page); with no pointer, a page of
    /// fewer than `size` items (counted at JSON pointer `items`) is the last.
    Numbers {
        /// The page parameter (`page`).
        page: &'static str,
        /// Items a full page holds (the page size the list request asks).
        size: u32,
        /// Pointer to the next page's number (`/meta/pagination/next_page`).
        next: Option<&'static str>,
        /// Pointer to the array of items, to count a short page.
        items: &'static str,
    },
    /// `?<page>=N`, from page 1, with the number of pages in every answer
    /// at JSON pointer `pages` (Linode's `{"page": 1, "pages": 3, "data":
    /// [...]}`): exactly as many pages are asked as exist, never one more.
    /// An answer without the count, a count that changes between pages, or
    /// an answer naming another page than the one asked (at the pointer
    /// beside `pages` named as the parameter: `/page`) fails the walk with
    /// a retryable `transport` error: a list read while it changes must not
    /// come back partial.
    Pages {
        /// The page parameter (`page`).
        page: &'static str,
        /// Pointer to the number of pages (`/pages`).
        pages: &'static str,
    },
    /// The body names the next page's URL at this JSON pointer
    /// (`/links/pages/next`); `null`, empty or absent on the last page.
    NextUrl {
        /// Pointer to the next page's URL.
        pointer: &'static str,
    },
    /// An RFC 8288 `Link` header with `rel="next"` names the next page.
    LinkHeader,
    /// The body carries a token at JSON pointer `pointer`, sent back as
    /// query parameter `param` (`nextToken`, `cursor`).
    Token {
        /// Query parameter of the request.
        param: &'static str,
        /// Pointer to the token in the body.
        pointer: &'static str,
    },
}

impl Paging {
    /// [`Paging::NextUrl`] at `pointer`.
    #[must_use]
    pub const fn next_url(pointer: &'static str) -> Self {
        Self::NextUrl { pointer }
    }

    /// [`Paging::Pages`]: page numbers in `page`, the count of pages at
    /// pointer `pages`.
    #[must_use]
    pub const fn pages(page: &'static str, pages: &'static str) -> Self {
        Self::Pages { page, pages }
    }

    /// [`Paging::Numbers`] with the next page's number at pointer `next`.
    #[must_use]
    pub const fn next_page(page: &'static str, next: &'static str) -> Self {
        Self::Numbers {
            page,
            size: 0,
            next: Some(next),
            items: "",
        }
    }

    /// [`Paging::Token`]: an opaque cursor or next token at pointer
    /// `pointer`, sent back as query parameter `param`.
    #[must_use]
    pub const fn cursor(param: &'static str, pointer: &'static str) -> Self {
        Self::Token { param, pointer }
    }
}

/// `base` with query parameter `page` set to `n` (other parameters kept).
fn numbered(base: &Request, page: &str, n: u64) -> Request {
    let url = base
        .url()
        .split_once('?')
        .map_or(base.url(), |(path, _)| path)
        .to_string();
    let mut req = base.clone().with_url(url);
    for (k, v) in base.query_pairs() {
        if k != *page {
            req = req.query(&k, &v);
        }
    }
    req.query(page, &n.to_string())
}

/// Sends `first` and every following page with `send`, handing each
/// successful page's JSON body to `each`, in order. A non-2xx answer ends
/// the walk with the error `send`'s caller makes of it: `send` returns
/// `Err` for those.
///
/// # Errors
/// What `send` or `each` return; [`Error::Transport`] for a body that is
/// not JSON, a next page already read, or more than [`MAX_PAGES`] pages.
pub fn walk(
    first: Request,
    paging: &Paging,
    mut send: impl FnMut(Request) -> Result<Response>,
    mut each: impl FnMut(&serde_json::Value) -> Result<()>,
) -> Result<()> {
    let mut request = match paging {
        Paging::Numbers { page, .. } | Paging::Pages { page, .. } => first.query(page, "1"),
        _ => first,
    };
    let base = request.clone();
    let mut seen = BTreeSet::new();
    let mut pages_seen: Option<u64> = None;
    for number in 1..=MAX_PAGES {
        let resp = send(request.clone())?;
        let body: serde_json::Value = resp.json()?;
        each(&body)?;
        let next = match paging {
            Paging::Single => None,
            Paging::Numbers {
                page,
                size,
                next,
                items,
            } => {
                let following = match next {
                    Some(pointer) => match body.pointer(pointer) {
                        None | Some(serde_json::Value::Null) => None,
                        Some(v) => Some(v.as_u64().ok_or_else(|| {
                            Error::Transport(format!(
                                "{}: the next page at {pointer} is {v}, not a page number",
                                resp.url
                            ))
                        })?),
                    },
                    None => {
                        let count = body
                            .pointer(items)
                            .and_then(|v| v.as_array())
                            .map_or(0, Vec::len);
                        (count >= *size as usize).then_some(number as u64 + 1)
                    }
                };
                following.map(|n| numbered(&base, page, n))
            }
            Paging::Pages { page, pages } => {
                let total = match body.pointer(pages) {
                    None | Some(serde_json::Value::Null) => {
                        return Err(Error::Transport(format!(
                            "{}: the answer has no number of pages at {pages}",
                            resp.url
                        )));
                    }
                    Some(v) => v.as_u64().ok_or_else(|| {
                        Error::Transport(format!(
                            "{}: the number of pages at {pages} is {v}, not a number",
                            resp.url
                        ))
                    })?,
                };
                // A list read while it changes would come back partial (and
                // a node missing from a listing looks gone): the walk fails,
                // retryably, instead.
                if let Some(first) = pages_seen
                    && first != total
                {
                    return Err(Error::Transport(format!(
                        "{}: the list changed while it was read (pages {first}, then {total}); read it again",
                        resp.url
                    )));
                }
                pages_seen = Some(total);
                let at = answered_page(pages, page);
                if let Some(v) = body.pointer(&at).filter(|v| !v.is_null())
                    && v.as_u64() != Some(number as u64)
                {
                    return Err(Error::Transport(format!(
                        "{}: page {number} was asked, the answer is page {v} (at {at}); read the list again",
                        resp.url
                    )));
                }
                ((number as u64) < total).then(|| numbered(&base, page, number as u64 + 1))
            }
            Paging::NextUrl { pointer } => body
                .pointer(pointer)
                .and_then(|v| v.as_str())
                .filter(|u| !u.is_empty())
                .map(|u| base.clone().with_url(u)),
            Paging::LinkHeader => resp
                .header("link")
                .and_then(next_link)
                .map(|u| base.clone().with_url(u)),
            Paging::Token { param, pointer } => body
                .pointer(pointer)
                .and_then(|v| v.as_str())
                .filter(|t| !t.is_empty())
                .map(|t| base.clone().query(param, t)),
        };
        let Some(next) = next else {
            return Ok(());
        };
        if !seen.insert(request.url().to_string()) || seen.contains(next.url()) {
            return Err(Error::Transport(format!(
                "{}: the list names a page already read as the next one ({})",
                resp.url,
                next.url()
            )));
        }
        request = next;
    }
    Err(Error::Transport(format!(
        "{}: the list goes on for more than {MAX_PAGES} pages; giving up",
        base.url()
    )))
}

/// Where a [`Paging::Pages`] answer says which page it is: beside the
/// count of pages, named as the page parameter (`/pages` and `page`:
/// `/page`, Linode's).
fn answered_page(pages: &str, page: &str) -> String {
    let parent = pages.rsplit_once('/').map_or("", |(parent, _)| parent);
    format!("{parent}/{page}")
}

/// The `rel="next"` target of a `Link` header value.
#[must_use]
pub fn next_link(value: &str) -> Option<String> {
    value.split(',').find_map(|link| {
        let (target, params) = link.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .filter_map(|p| p.trim().split_once('='))
            .any(|(k, v)| {
                k.trim().eq_ignore_ascii_case("rel")
                    && v.trim()
                        .trim_matches('"')
                        .split_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("next"))
            })
            .then(|| target.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(url: &str, body: serde_json::Value, headers: &[(&str, &str)]) -> Response {
        Response {
            status: 200,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            body: body.to_string().into_bytes(),
            url: url.to_string(),
        }
    }

    fn run(
        paging: Paging,
        first: Request,
        mut serve: impl FnMut(&Request) -> Response,
    ) -> (Result<()>, Vec<String>) {
        let mut asked = Vec::new();
        let result = walk(
            first,
            &paging,
            |req| {
                asked.push(req.url().to_string());
                Ok(serve(&req))
            },
            |_| Ok(()),
        );
        (result, asked)
    }

    #[test]
    fn page_numbers_follow_the_body_or_stop_at_a_short_page() {
        let paging = Paging::Numbers {
            page: "page",
            size: 2,
            next: Some("/meta/next"),
            items: "/items",
        };
        let first = Request::get("https://x/s?sel=a%3Db").query("per_page", "2");
        let (r, asked) = run(paging, first, |req| {
            let page: u64 = req.query_value("page").unwrap().parse().unwrap();
            let next = if page < 3 {
                serde_json::json!(page + 1)
            } else {
                serde_json::Value::Null
            };
            answer(
                req.url(),
                serde_json::json!({"items": [1, 2], "meta": {"next": next}}),
                &[],
            )
        });
        r.unwrap();
        assert_eq!(
            asked,
            [
                "https://x/s?sel=a%3Db&per_page=2&page=1",
                "https://x/s?sel=a%3Db&per_page=2&page=2",
                "https://x/s?sel=a%3Db&per_page=2&page=3"
            ]
        );
        let paging = Paging::Numbers {
            page: "page",
            size: 2,
            next: None,
            items: "/items",
        };
        let (r, asked) = run(paging, Request::get("https://x/s?per_page=2"), |req| {
            let page: u64 = req.query_value("page").unwrap().parse().unwrap();
            let items: Vec<u64> = if page == 1 { vec![1, 2] } else { vec![3] };
            answer(req.url(), serde_json::json!({"items": items}), &[])
        });
        r.unwrap();
        assert_eq!(asked.len(), 2);
    }

    #[test]
    fn a_count_of_pages_asks_exactly_that_many() {
        // 1000 items at 500 a page: two pages, never a third (a short-page
        // rule asks a third, empty one).
        for (items, want) in [(1000_u64, 2_usize), (1001, 3), (0, 1), (499, 1)] {
            let pages = items.div_ceil(500).max(1);
            let (r, asked) = run(
                Paging::pages("page", "/pages"),
                Request::get("https://x/linode/instances?page_size=500"),
                |req| {
                    let page: u64 = req.query_value("page").unwrap().parse().unwrap();
                    let n = items.saturating_sub((page - 1) * 500).min(500);
                    answer(
                        req.url(),
                        serde_json::json!({"data": vec![0; n as usize], "page": page, "pages": pages}),
                        &[],
                    )
                },
            );
            r.unwrap();
            assert_eq!(asked.len(), want, "{items}: {asked:?}");
        }
        let (r, _) = run(
            Paging::pages("page", "/pages"),
            Request::get("https://x/l"),
            |req| answer(req.url(), serde_json::json!({"pages": "many"}), &[]),
        );
        assert!(matches!(r, Err(Error::Transport(m)) if m.contains("not a number")));
    }

    #[test]
    fn a_list_that_changes_while_it_is_read_fails_the_walk() {
        let pages_run = |serve: fn(u64) -> serde_json::Value| {
            run(
                Paging::pages("page", "/pages"),
                Request::get("https://x/l"),
                |req| {
                    let page: u64 = req.query_value("page").unwrap().parse().unwrap();
                    answer(req.url(), serve(page), &[])
                },
            )
        };
        // Three pages, then two: what was on page 3 moved to page 2.
        let (r, asked) = pages_run(|p| serde_json::json!({"page": p, "pages": 4 - p.min(2)}));
        assert!(
            matches!(&r, Err(Error::Transport(m)) if m.contains("changed")),
            "{r:?}"
        );
        assert!(r.unwrap_err().is_retryable());
        assert_eq!(asked.len(), 2);
        // Page 1 again when page 2 was asked.
        let (r, _) = pages_run(|_| serde_json::json!({"page": 1, "pages": 2}));
        assert!(
            matches!(&r, Err(Error::Transport(m)) if m.contains("page 2 was asked")),
            "{r:?}"
        );
        // No count of pages: not one page, an error.
        let (r, _) = pages_run(|p| serde_json::json!({"page": p, "data": []}));
        assert!(
            matches!(&r, Err(Error::Transport(m)) if m.contains("no number of pages")),
            "{r:?}"
        );
        // A steady list reads whole; an answer without its page number too.
        let (r, asked) = pages_run(|p| serde_json::json!({"page": p, "pages": 3}));
        assert!(r.is_ok() && asked.len() == 3);
        let (r, asked) = pages_run(|_| serde_json::json!({"pages": 2}));
        assert!(r.is_ok() && asked.len() == 2);
        assert_eq!(answered_page("/meta/pages", "p"), "/meta/p");
    }

    #[test]
    fn links_tokens_and_urls_are_followed_and_loops_refused() {
        let (r, asked) = run(Paging::LinkHeader, Request::get("https://x/a"), |req| {
            let link = if req.url().ends_with("/a") {
                r#"<https://x/a?page=1>; rel="prev", <https://x/b>; rel="next last""#
            } else {
                r#"<https://x/a>; rel="first""#
            };
            answer(req.url(), serde_json::json!([]), &[("link", link)])
        });
        r.unwrap();
        assert_eq!(asked, ["https://x/a", "https://x/b"]);

        let paging = Paging::Token {
            param: "nextToken",
            pointer: "/next",
        };
        let (r, asked) = run(paging, Request::get("https://x/l"), |req| {
            let next = if req.query_value("nextToken").is_none() {
                "t 1"
            } else {
                ""
            };
            answer(req.url(), serde_json::json!({"next": next}), &[])
        });
        r.unwrap();
        assert_eq!(asked, ["https://x/l", "https://x/l?nextToken=t%201"]);

        // A next page that was already read ends the walk with an error.
        let paging = Paging::NextUrl { pointer: "/next" };
        let (r, asked) = run(paging, Request::get("https://x/1"), |req| {
            let next = if req.url().ends_with("/1") {
                "https://x/2"
            } else {
                "https://x/1"
            };
            answer(req.url(), serde_json::json!({"next": next}), &[])
        });
        assert!(matches!(r, Err(Error::Transport(m)) if m.contains("already read")));
        assert_eq!(asked.len(), 2);

        // Endless distinct pages stop at the bound.
        let mut n = 0;
        let (r, asked) = run(
            Paging::NextUrl { pointer: "/next" },
            Request::get("https://x/0"),
            |req| {
                n += 1;
                answer(
                    req.url(),
                    serde_json::json!({"next": format!("https://x/{n}")}),
                    &[],
                )
            },
        );
        assert!(matches!(r, Err(Error::Transport(m)) if m.contains("more than 1000 pages")));
        assert_eq!(asked.len(), MAX_PAGES);
    }

    #[test]
    fn link_headers_parse() {
        assert_eq!(
            next_link(r#"<https://a/?p=2>; rel=next"#).as_deref(),
            Some("https://a/?p=2")
        );
        assert_eq!(next_link(r#"<https://a/>; rel="prev""#), None);
        assert_eq!(next_link("garbage"), None);
    }
}
