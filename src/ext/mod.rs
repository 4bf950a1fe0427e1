//! Protocol extensions around the envelope: what agents built on the designs this
//! project grew from carry inside a sealed MailA2A message.

pub mod aep;
pub mod agent_card;
pub mod edge_cloud;
pub mod payment;
pub mod peer_home;
pub mod peers;
