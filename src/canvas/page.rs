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
    }
}
