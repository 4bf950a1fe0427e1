//! Pins and bindings keyed by identity (address, key), not by the spelling they came from.
