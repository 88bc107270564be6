//! Pages of schema v1: the `pages` root map, `{name, index}` per page id (`page:main` in every
//! new room). Owns page existence, listing and creation; shapes refer to pages by `pageId`.

use yrs::{Any, Map, MapPrelim, Out, ReadTxn, TransactionMut};

use super::shape::Prop;

/// True if the page exists.
pub fn page_exists<T: ReadTxn>(txn: &T, page_id: &str) -> bool {
    txn.get_map(super::schema::PAGES)
        .and_then(|p| p.get(txn, page_id))
        .is_some()
}

/// Ids and z-order keys of every page.
pub fn page_indexes<T: ReadTxn>(txn: &T) -> Vec<(String, String)> {
    let Some(pages) = txn.get_map(super::schema::PAGES) else {
        return Vec::new();
    };
    pages
        .iter(txn)
        .map(|(id, v)| {
            let index = match v {
                Out::YMap(m) => match super::shape::read_prop(txn, &m, "index") {
                    Prop::Str(s) => s,
                    _ => String::new(),
                },
                _ => String::new(),
            };
            (id.to_owned(), index)
        })
        .collect()
}

/// A page as the fairies' prompt lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PageInfo {
    /// Page id (`page:main`).
    pub id: String,
    /// Its name as people see it.
    pub name: String,
}

/// Every page with its name, in page order (`index`, then id).
pub fn list_pages<T: ReadTxn>(txn: &T) -> Vec<PageInfo> {
    let Some(pages) = txn.get_map(super::schema::PAGES) else {
        return Vec::new();
    };
    let mut listed: Vec<(String, PageInfo)> = pages
        .iter(txn)
        .map(|(id, v)| {
            let prop = |key: &str| match &v {
                Out::YMap(m) => match super::shape::read_prop(txn, m, key) {
                    Prop::Str(s) => s,
                    _ => String::new(),
                },
                _ => String::new(),
            };
            let info = PageInfo {
                id: id.to_owned(),
                name: prop("name"),
            };
            (prop("index"), info)
        })
        .collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
    listed.into_iter().map(|(_, info)| info).collect()
}

/// Creates a page `{name, index}`; false if `page_id` exists already.
pub fn create_page(txn: &mut TransactionMut<'_>, page_id: &str, name: &str, index: &str) -> bool {
    use yrs::WriteTxn;
    let pages = txn.get_or_insert_map(super::schema::PAGES);
    if pages.get(txn, page_id).is_some() {
        return false;
    }
    let prelim = MapPrelim::from([("name", Any::from(name)), ("index", Any::from(index))]);
    pages.insert(txn, page_id, prelim);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::{Doc, Transact};

    #[test]
    fn pages_are_created_once_and_listed() {
        let doc = Doc::new();
        crate::canvas::init_schema(&doc, "system");
        assert!(page_exists(&doc.transact(), "page:main"));
        assert!(create_page(
            &mut doc.transact_mut(),
            "page:two",
            "Two",
            "81"
        ));
        assert!(!create_page(
            &mut doc.transact_mut(),
            "page:two",
            "Again",
            "82"
        ));
        let mut pages = page_indexes(&doc.transact());
        pages.sort();
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[1], ("page:two".to_string(), "81".to_string()));
        // A key extended by anything sorts after it; the empty key before every other.
        let after_main = format!("{}V", crate::canvas::zorder::first_index());
        create_page(&mut doc.transact_mut(), "page:b", "After", &after_main);
        create_page(&mut doc.transact_mut(), "page:a", "First", "");
        let named = list_pages(&doc.transact());
        let ids: Vec<&str> = named
            .iter()
            .map(|p| p.id.as_str())
            .filter(|id| *id != "page:two")
            .collect();
        assert_eq!(ids, ["page:a", "page:main", "page:b"]);
        assert!(
            named
                .iter()
                .any(|p| p.id == "page:main" && p.name == "Page 1")
        );
    }
}
