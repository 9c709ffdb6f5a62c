//! A person's input from the live view, replayed on the page as trusted CDP input. Coordinates
//! are CSS pixels of the page's viewport: the viewer scales them from its screen.

use std::sync::Arc;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    ImeSetCompositionParams, InsertTextParams, MouseButton,
};
use serde::Deserialize;

use crate::browser::pool::BrowserHandle;
use crate::error::ToolResult;

/// Longest text one input event may carry (a paste).
const MAX_TEXT_CHARS: usize = 100_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RemoteInput {
    Mouse {
        action: MouseKind,
        x: f64,
        y: f64,
        #[serde(default)]
        button: Button,
        /// Buttons held, as `MouseEvent.buttons`.
        #[serde(default)]
        buttons: i64,
        #[serde(default)]
        clicks: i64,
        #[serde(default)]
        modifiers: i64,
    },
    Wheel {
        x: f64,
        y: f64,
        dx: f64,
        dy: f64,
        #[serde(default)]
        modifiers: i64,
    },
    /// A key as the viewer's browser reported it (`KeyboardEvent.key`, `.code`, `.keyCode`);
    /// `text` when it types (no Control, Alt or Meta held).
    Key {
        action: KeyKind,
        key: String,
        #[serde(default)]
        code: String,
        #[serde(default)]
        key_code: i64,
        #[serde(default)]
        modifiers: i64,
        text: Option<String>,
        #[serde(default)]
        location: i64,
    },
    /// Text typed without keys: a paste, a finished composition, text a tool inserted.
    Text { text: String },
    /// An IME composition in progress (shown in the page, not committed yet).
    Compose { text: String },
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseKind {
    Move,
    Down,
    Up,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Button {
    #[default]
    None,
    Left,
    Middle,
    Right,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    Down,
    Up,
}

impl RemoteInput {
    pub(super) async fn dispatch(
        self,
        page: &Page,
        browser: &Arc<BrowserHandle>,
    ) -> ToolResult<()> {
        match self {
            RemoteInput::Mouse {
                action,
                x,
                y,
                button,
                buttons,
                clicks,
                modifiers,
            } => {
                let kind = match action {
                    MouseKind::Move => DispatchMouseEventType::MouseMoved,
                    MouseKind::Down => DispatchMouseEventType::MousePressed,
                    MouseKind::Up => DispatchMouseEventType::MouseReleased,
                };
                let mut params = DispatchMouseEventParams::new(kind, x, y);
                params.button = Some(button.cdp());
                params.buttons = Some(buttons);
                params.click_count = Some(clicks.clamp(0, 3));
                params.modifiers = Some(modifiers);
                browser
                    .cdp("moving the mouse", page.execute(params))
                    .await?;
            }
            RemoteInput::Wheel {
                x,
                y,
                dx,
                dy,
                modifiers,
            } => {
                let mut params =
                    DispatchMouseEventParams::new(DispatchMouseEventType::MouseWheel, x, y);
                params.delta_x = Some(dx);
                params.delta_y = Some(dy);
                params.modifiers = Some(modifiers);
                browser.cdp("scrolling", page.execute(params)).await?;
            }
            RemoteInput::Key {
                action,
                key,
                code,
                key_code,
                modifiers,
                text,
                location,
            } => {
                let params = key_params(action, key, code, key_code, modifiers, text, location);
                browser.cdp("pressing a key", page.execute(params)).await?;
            }
            RemoteInput::Text { text } => {
                let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
                browser
                    .cdp("typing", page.execute(InsertTextParams::new(text)))
                    .await?;
            }
            RemoteInput::Compose { text } => {
                let end = text.encode_utf16().count() as i64;
                let params = ImeSetCompositionParams::new(text, end, end);
                browser.cdp("composing", page.execute(params)).await?;
            }
        }
        Ok(())
    }
}

/// A person's key as CDP's key event: a key that types text is a `keyDown` with it, one that
/// does not a `rawKeyDown`.
fn key_params(
    action: KeyKind,
    key: String,
    code: String,
    key_code: i64,
    modifiers: i64,
    text: Option<String>,
    location: i64,
) -> DispatchKeyEventParams {
    let text = text.filter(|t| !t.is_empty());
    let kind = match (action, &text) {
        (KeyKind::Down, Some(_)) => DispatchKeyEventType::KeyDown,
        (KeyKind::Down, None) => DispatchKeyEventType::RawKeyDown,
        (KeyKind::Up, _) => DispatchKeyEventType::KeyUp,
    };
    DispatchKeyEventParams {
        r#type: kind,
        modifiers: Some(modifiers),
        unmodified_text: text.clone(),
        text,
        code: Some(code),
        key: Some(key),
        windows_virtual_key_code: Some(key_code),
        native_virtual_key_code: Some(key_code),
        timestamp: None,
        key_identifier: None,
        auto_repeat: None,
        is_keypad: Some(location == 3),
        is_system_key: None,
        location: Some(location),
        commands: None,
    }
}

impl Button {
    fn cdp(self) -> MouseButton {
        match self {
            Button::None => MouseButton::None,
            Button::Left => MouseButton::Left,
            Button::Middle => MouseButton::Middle,
            Button::Right => MouseButton::Right,
        }
    }
}
