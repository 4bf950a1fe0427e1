//! X.509 certificate paths: built from the store's anchors and imported intermediates
//! plus what the message carries; validity and key usage at receipt.
