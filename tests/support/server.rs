//! The one way the integration tests start an in-process server: [`TestServer::start`] from a
//! config (the store the config names), or [`TestServer::builder`] for a store the test keeps
//! (to read it, or to restart on it) and adjusted room settings (an injected clock, shorter
//! sweeps). Owns nothing of what a test then does with the server; tests that need the shipped
//! binary spawn it with [`super::services::Node`].

use std::sync::Arc;

use fairyring::config::ServeConfig;
use fairyring::room::RoomConfig;
use fairyring::server::{self, ServerHandle};
use fairyring::store::Store;

/// A started server and its base URLs.
pub struct TestServer {
    pub handle: ServerHandle,
    /// `ws://ADDR`
    pub ws: String,
    /// `http://ADDR`
    pub http: String,
}

/// How a [`TestServer`] is started: the config, and optionally the store and room settings.
pub struct Builder {
    config: ServeConfig,
    store: Option<Arc<dyn Store>>,
    rooms: Box<dyn FnOnce(&ServeConfig) -> RoomConfig>,
}

impl TestServer {
    /// Starts a server from `config` on the store it names (`memory:` in
    /// `ServeConfig::for_test()`); panics, with the cause, when it cannot start.
    pub async fn start(config: ServeConfig) -> TestServer {
        Self::builder(config).start().await
    }

    /// A server from `config`, to be given a store or room settings before it starts.
    pub fn builder(config: ServeConfig) -> Builder {
        Builder {
            config,
            store: None,
            rooms: Box::new(RoomConfig::from_serve),
        }
    }

    /// The handle and both base URLs, for the tests' own tuples.
    pub fn into_parts(self) -> (ServerHandle, String, String) {
        (self.handle, self.ws, self.http)
    }
}

impl Builder {
    /// Serves `store` instead of opening the one the config names.
    pub fn on(mut self, store: Arc<dyn Store>) -> Builder {
        self.store = Some(store);
        self
    }

    /// Room settings from the config through `rooms` (instead of `RoomConfig::from_serve`).
    pub fn rooms(mut self, rooms: impl FnOnce(&ServeConfig) -> RoomConfig + 'static) -> Builder {
        self.rooms = Box::new(rooms);
        self
    }

    /// Binds 127.0.0.1:0 (the config's listen address) and starts; panics with the cause when
    /// the server cannot start.
    pub async fn start(self) -> TestServer {
        let store = match self.store {
            Some(store) => store,
            None => {
                fairyring::store::open_in(&self.config.store, self.config.store_schema.as_deref())
                    .await
                    .unwrap_or_else(|e| panic!("the store opens: {e:#}"))
            }
        };
        let handle = server::start_with(self.config, self.rooms, store)
            .await
            .unwrap_or_else(|e| panic!("the server starts: {e:#}"));
        TestServer {
            ws: format!("ws://{}", handle.addr()),
            http: format!("http://{}", handle.addr()),
            handle,
        }
    }
}
