//! Who a message is for: us among the protected recipients, no reflection of our own
//! mail, and legacy mail only from peers marked as legacy.
