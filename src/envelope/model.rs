//! The binding's vocabularies: kinds, operation tokens, payment kinds, group coordinates.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `kind`: what one message is in its exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The operation request (sequence 0).
    Request,
    /// A response (sequence >= 1).
    Response,
    /// A stream or task event (sequence >= 1).
    Event,
    /// An A2A error reply (sequence >= 1).
    Error,
}

impl Kind {
    /// The token on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Response => "response",
            Self::Event => "event",
            Self::Error => "error",
        }
    }
    /// Responses, events and errors answer a request.
    pub fn is_reply(self) -> bool {
        !matches!(self, Self::Request)
    }
}

impl FromStr for Kind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "request" => Self::Request,
            "response" => Self::Response,
            "event" => Self::Event,
            "error" => Self::Error,
            _ => return Err(()),
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `operation`: the MailA2A tokens of spec section 5 (DESIGN decision 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `message/send` (SendMessage).
    MessageSend,
    /// `message/stream` (SendStreamingMessage).
    MessageStream,
    /// `tasks/get` (GetTask).
    TasksGet,
    /// `tasks/list` (ListTasks).
    TasksList,
    /// `tasks/cancel` (CancelTask).
    TasksCancel,
    /// `tasks/subscribe` (SubscribeToTask).
    TasksSubscribe,
    /// `push/create` (CreateTaskPushNotificationConfig).
    PushCreate,
    /// `push/get` (GetTaskPushNotificationConfig).
    PushGet,
    /// `push/list` (ListTaskPushNotificationConfigs).
    PushList,
    /// `push/delete` (DeleteTaskPushNotificationConfig).
    PushDelete,
    /// `agent-card/get-extended` (GetExtendedAgentCard).
    AgentCardGetExtended,
}

impl Operation {
    /// Every operation, in the spec's table order.
    pub const ALL: [Operation; 11] = [
        Self::MessageSend,
        Self::MessageStream,
        Self::TasksGet,
        Self::TasksList,
        Self::TasksCancel,
        Self::TasksSubscribe,
        Self::PushCreate,
        Self::PushGet,
        Self::PushList,
        Self::PushDelete,
        Self::AgentCardGetExtended,
    ];

    /// The MailA2A token.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MessageSend => "message/send",
            Self::MessageStream => "message/stream",
            Self::TasksGet => "tasks/get",
            Self::TasksList => "tasks/list",
            Self::TasksCancel => "tasks/cancel",
            Self::TasksSubscribe => "tasks/subscribe",
            Self::PushCreate => "push/create",
            Self::PushGet => "push/get",
            Self::PushList => "push/list",
            Self::PushDelete => "push/delete",
            Self::AgentCardGetExtended => "agent-card/get-extended",
        }
    }

    /// The A2A v1.0 method name (the `rpc` of `lf.a2a.v1.A2AService`).
    pub fn a2a_method(self) -> &'static str {
        match self {
            Self::MessageSend => "SendMessage",
            Self::MessageStream => "SendStreamingMessage",
            Self::TasksGet => "GetTask",
            Self::TasksList => "ListTasks",
            Self::TasksCancel => "CancelTask",
            Self::TasksSubscribe => "SubscribeToTask",
            Self::PushCreate => "CreateTaskPushNotificationConfig",
            Self::PushGet => "GetTaskPushNotificationConfig",
            Self::PushList => "ListTaskPushNotificationConfigs",
            Self::PushDelete => "DeleteTaskPushNotificationConfig",
            Self::AgentCardGetExtended => "GetExtendedAgentCard",
        }
    }

    /// Operations with side effects, which need an `idempotencyKey` (DESIGN decision 2).
    pub fn is_effectful(self) -> bool {
        matches!(
            self,
            Self::MessageSend
                | Self::MessageStream
                | Self::TasksCancel
                | Self::PushCreate
                | Self::PushDelete
        )
    }
}

impl FromStr for Operation {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|o| o.as_str() == s).ok_or(())
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `payment.kind` (spec section 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PaymentKind {
    /// x402 `PaymentRequired`, on a `PaymentRequiredError` reply.
    Required,
    /// x402 `PaymentPayload`, on the retried request.
    Payload,
    /// x402 `SettlementResponse`, on a response or event.
    Response,
}

impl PaymentKind {
    /// The token on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::Payload => "payload",
            Self::Response => "response",
        }
    }
}

impl FromStr for PaymentKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "required" => Self::Required,
            "payload" => Self::Payload,
            "response" => Self::Response,
            _ => return Err(()),
        })
    }
}

/// `group`: MLS coordinates of a group message (DESIGN "MLS").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupCoordinates {
    /// base64url (unpadded) of the MLS group id.
    pub id: String,
    /// MLS epoch of the application message.
    pub epoch: u64,
    /// Sender ratchet generation of the application message.
    pub generation: u64,
}

/// The A2A v1.0 terminal task states: a message carrying one must be `final`.
pub const TERMINAL_TASK_STATES: [&str; 4] = [
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
];

/// The task state a payload reports: a Task (`task.status.state`, as in
/// SendMessageResponse and StreamResponse), a bare Task or TaskStatusUpdateEvent
/// (`status.state`), or a StreamResponse status update (`statusUpdate.status.state`).
pub(crate) fn task_state(payload: super::borrowed::Value<'_>) -> Option<&str> {
    fn state_of(v: super::borrowed::Value<'_>) -> Option<&str> {
        v.get("status")?.get("state")?.as_str()
    }
    payload
        .get("task")
        .and_then(state_of)
        .or_else(|| state_of(payload))
        .or_else(|| payload.get("statusUpdate").and_then(state_of))
}
