//! The value formats of HTML's value controls (date, time, month, week, datetime-local, colour,
//! number, range): what an agent wrote, checked and turned into the one string the control
//! accepts, so the value can be set as a person's pick would set it.
//!
//! Only unambiguous spellings are converted: `15 March 2027`, `2027/03/15`, `03/15/2027` (no
//! other reading), `03/04/2027` only when the page's `lang` says which order its people write.
//! Anything else is refused with the format the control expects, and nothing is changed.

use crate::error::{ToolError, ToolResult};

/// An `<input>` type whose value is set, not typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueKind {
    Date,
    Time,
    Month,
    Week,
    DateTimeLocal,
    Color,
    Number,
    Range,
}

impl ValueKind {
    /// The kind of an `<input type=…>`, `None` for controls that take typing.
    pub(crate) fn of(input_type: &str) -> Option<Self> {
        Some(match input_type {
            "date" => Self::Date,
            "time" => Self::Time,
            "month" => Self::Month,
            "week" => Self::Week,
            "datetime-local" => Self::DateTimeLocal,
            "color" => Self::Color,
            "number" => Self::Number,
            "range" => Self::Range,
            _ => return None,
        })
    }

    /// The control's name, the format it takes and an example of it.
    pub(crate) fn format(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::Date => ("date", "YYYY-MM-DD", "2027-03-15"),
            Self::Time => ("time", "HH:MM (24-hour)", "13:45"),
            Self::Month => ("month", "YYYY-MM", "2027-03"),
            Self::Week => ("week", "YYYY-Www", "2027-W11"),
            Self::DateTimeLocal => ("datetime-local", "YYYY-MM-DDTHH:MM", "2027-03-15T13:45"),
            Self::Color => ("color", "#rrggbb", "#1e90ff"),
            Self::Number => ("number", "a number", "42"),
            Self::Range => ("range", "a number", "42"),
        }
    }
}

/// `text` as the value a control of `kind` holds, on a page whose `lang` is given; an
/// `INVALID_ARGUMENT` naming the expected format otherwise.
pub(crate) fn control_value(kind: ValueKind, text: &str, lang: &str) -> ToolResult<String> {
    let text = text.trim();
    let value = match kind {
        ValueKind::Date => date(text, lang).map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}")),
        ValueKind::Time => time(text),
        ValueKind::Month => month(text),
        ValueKind::Week => week(text),
        ValueKind::DateTimeLocal => date_time(text, lang),
        ValueKind::Color => colour(text),
        ValueKind::Number | ValueKind::Range => number(text),
    };
    value.map_err(|why| refusal(kind, text, &why))
}

/// The error for a value the control cannot take; `why` adds what was wrong, if known.
pub(crate) fn refusal(kind: ValueKind, text: &str, why: &str) -> ToolError {
    let (name, format, example) = kind.format();
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" ({why})")
    };
    ToolError::invalid(format!(
        "field `text`: {text:?} is not a value this {name} control takes{why}; it expects {format}"
    ))
    .with_hint(format!(
        "nothing was changed; give the value as {format}, e.g. \"text\": \"{example}\""
    ))
}

type Parsed<T> = Result<T, String>;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Language tags whose people write a numeric date month first.
const MONTH_FIRST: &[&str] = &["en-us", "en-ph", "en-um", "es-us"];
/// Tags that do not say which order (both are common): no guess.
const EITHER_ORDER: &[&str] = &["en", "en-ca"];
/// Languages (primary subtags) whose people write day first, unless a tag above says otherwise.
const DAY_FIRST: &[&str] = &[
    "en", "fr", "de", "es", "it", "pt", "nl", "ru", "pl", "da", "sv", "nb", "nn", "no", "fi", "cs",
    "sk", "tr", "el", "ro", "uk", "id", "vi", "he", "ar", "hi", "ga", "cy", "ca", "hr", "sl", "sr",
    "bg", "et", "lv", "lt", "is", "ms", "th",
];

/// A month named in English (full, or its first three letters or more).
fn month_named(word: &str) -> Option<u32> {
    let word = word.trim_end_matches('.');
    if word.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| m.starts_with(word))
        .map(|i| i as u32 + 1)
}

fn days_in(year: i32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

fn valid_date(y: i32, m: u32, d: u32) -> bool {
    (1..=12).contains(&m) && d >= 1 && d <= days_in(y, m)
}

fn digits(part: &str, min: usize, max: usize) -> Option<u32> {
    let ok = (min..=max).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| part.parse().ok()).flatten()
}

fn year(part: &str) -> Option<i32> {
    digits(part, 4, 4).map(|y| y as i32)
}

/// Which order `lang` writes a numeric day and month in: `Some(true)` month first.
fn month_first(lang: &str) -> Option<bool> {
    let lang = lang.trim().to_ascii_lowercase().replace('_', "-");
    let primary = lang.split('-').next().unwrap_or_default();
    if MONTH_FIRST.contains(&lang.as_str()) {
        Some(true)
    } else if EITHER_ORDER.contains(&lang.as_str()) {
        None
    } else {
        DAY_FIRST.contains(&primary).then_some(false)
    }
}

fn date(text: &str, lang: &str) -> Parsed<(i32, u32, u32)> {
    let lower = text.to_lowercase();
    let parts: Vec<&str> = lower.split(['-', '/', '.']).collect();
    let (y, m, d) = if parts.len() == 3 && parts.iter().all(|p| digits(p, 1, 4).is_some()) {
        numeric_date(&parts, lang)?
    } else {
        worded_date(&lower)?
    };
    if valid_date(y, m, d) {
        Ok((y, m, d))
    } else {
        Err(format!("{y:04}-{m:02}-{d:02} is not a day of the calendar"))
    }
}

/// `2027-03-15`, `2027/3/15`, `15.03.2027`, `03/15/2027`: year first, or last with the day
/// and month told apart by their values or the page's language.
fn numeric_date(parts: &[&str], lang: &str) -> Parsed<(i32, u32, u32)> {
    let number = |i: usize| digits(parts[i], 1, 2).ok_or_else(String::new);
    if let Some(y) = year(parts[0]) {
        return Ok((y, number(1)?, number(2)?));
    }
    let y = year(parts[2]).ok_or_else(|| "the year must have four digits".to_string())?;
    let (a, b) = (number(0)?, number(1)?);
    let month_first_reading = valid_date(y, a, b);
    let day_first_reading = valid_date(y, b, a);
    match (month_first_reading, day_first_reading) {
        (true, false) => Ok((y, a, b)),
        (false, true) => Ok((y, b, a)),
        _ if a == b => Ok((y, a, b)),
        (true, true) => match month_first(lang) {
            Some(true) => Ok((y, a, b)),
            Some(false) => Ok((y, b, a)),
            None => Err(format!(
                "it could be month {a} day {b} or day {a} month {b}, and the page's lang does not say which"
            )),
        },
        (false, false) => Err(String::new()),
    }
}

/// `15 March 2027`, `March 15th, 2027`, `Mon, 15 Mar 2027`: one month name, one four-digit
/// year, one day.
fn worded_date(lower: &str) -> Parsed<(i32, u32, u32)> {
    let (mut y, mut m, mut d) = (None, None, None);
    for word in lower.split(|c: char| c.is_whitespace() || c == ',') {
        let word = word.trim_end_matches('.');
        let weekday = word.len() >= 3 && WEEKDAYS.iter().any(|w| w.starts_with(word));
        if word.is_empty() || weekday || word == "of" || word == "the" {
            continue;
        }
        let day = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let ordinal =
            day.len() < word.len() && ["st", "nd", "rd", "th"].contains(&&word[day.len()..]);
        let slot = if let Some(found) = year(word) {
            y.replace(found).map(drop)
        } else if let Some(found) = month_named(word) {
            m.replace(found).map(drop)
        } else if let Some(found) = digits(day, 1, 2).filter(|_| ordinal || day == word) {
            d.replace(found).map(drop)
        } else {
            return Err(String::new());
        };
        if slot.is_some() {
            return Err(String::new());
        }
    }
    match (y, m, d) {
        (Some(y), Some(m), Some(d)) => Ok((y, m, d)),
        _ => Err(String::new()),
    }
}

/// `13:45`, `9:05`, `13:45:30`, `13:45:30.250`, `1:45 PM`, `1pm` → `HH:MM[:SS[.sss]]`; zero
/// seconds are dropped, as the browser does.
fn time(text: &str) -> Parsed<String> {
    let lower = text.trim().to_lowercase();
    let (clock, pm) = ["a.m.", "am", "p.m.", "pm"]
        .iter()
        .find_map(|suffix| {
            let rest = lower.strip_suffix(suffix)?;
            Some((rest.trim_end(), Some(suffix.starts_with('p'))))
        })
        .unwrap_or((lower.as_str(), None));
    let fields: Vec<&str> = clock.split(':').collect();
    if fields.len() > 3 {
        return Err(String::new());
    }
    let mut hour = digits(fields[0], 1, 2).ok_or_else(String::new)?;
    let minute = match fields.get(1) {
        Some(m) => digits(m, 2, 2).ok_or_else(String::new)?,
        None if pm.is_some() => 0,
        None => return Err(String::new()),
    };
    let (second, millis) = match fields.get(2) {
        Some(s) => {
            let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
            let fraction_ok = fraction.len() <= 3 && fraction.bytes().all(|b| b.is_ascii_digit());
            if !fraction_ok || s.ends_with('.') {
                return Err(String::new());
            }
            let second = digits(whole, 2, 2).ok_or_else(String::new)?;
            (second, format!("{fraction:0<3}"))
        }
        None => (0, String::new()),
    };
    if let Some(pm) = pm {
        if !(1..=12).contains(&hour) {
            return Err("a 12-hour time runs from 1 to 12".into());
        }
        hour = hour % 12 + if pm { 12 } else { 0 };
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("no such time of day".into());
    }
    let mut out = format!("{hour:02}:{minute:02}");
    let millis = millis.trim_end_matches('0');
    if second != 0 || !millis.is_empty() {
        out.push_str(&format!(":{second:02}"));
    }
    if !millis.is_empty() {
        out.push('.');
        out.push_str(millis);
    }
    Ok(out)
}

/// `2027-03`, `2027/3`, `03/2027`, `March 2027`, `Mar 2027`.
fn month(text: &str) -> Parsed<String> {
    let lower = text.to_lowercase();
    let (y, m) = match lower
        .split(['-', '/', '.', ' ', ','])
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()[..]
    {
        [a, b] if year(a).is_some() => (year(a), digits(b, 1, 2)),
        [a, b] if year(b).is_some() => (year(b), digits(a, 1, 2).or_else(|| month_named(a))),
        _ => (None, None),
    };
    match (y, m) {
        (Some(y), Some(m)) if (1..=12).contains(&m) => Ok(format!("{y:04}-{m:02}")),
        _ => Err(String::new()),
    }
}

/// `2027-W11`, `2027-w11`, `2027 W11`, `2027W11`: weeks of the ISO calendar.
fn week(text: &str) -> Parsed<String> {
    let lower = text.to_lowercase();
    let (y, w) = lower
        .split_once('w')
        .ok_or_else(|| "the week number goes after a W".to_string())?;
    let y = year(y.trim_end_matches(['-', ' '])).ok_or_else(String::new)?;
    let w = digits(w.trim(), 1, 2).ok_or_else(String::new)?;
    if !(1..=53).contains(&w) {
        return Err("weeks run from 1 to 53".into());
    }
    Ok(format!("{y:04}-W{w:02}"))
}

/// A date and a time: `2027-03-15T13:45`, `2027-03-15 13:45`, `03/15/2027 1:45 PM`,
/// `15 March 2027 13:45`.
fn date_time(text: &str, lang: &str) -> Parsed<String> {
    let bytes = text.as_bytes();
    let t = (1..bytes.len().saturating_sub(1)).find(|&i| {
        matches!(bytes[i], b'T' | b't')
            && bytes[i - 1].is_ascii_digit()
            && bytes[i + 1].is_ascii_digit()
    });
    let candidates: Vec<(&str, &str)> = match t {
        Some(i) => vec![(&text[..i], &text[i + 1..])],
        None => {
            // The time is the last word, or the last two ("1:45 PM").
            let words: Vec<usize> = text.match_indices(' ').map(|(i, _)| i).collect();
            words
                .iter()
                .rev()
                .take(2)
                .map(|&i| (&text[..i], &text[i + 1..]))
                .collect()
        }
    };
    for (day, clock) in candidates {
        if let (Ok((y, m, d)), Ok(clock)) =
            (date(day.trim().trim_end_matches(','), lang), time(clock))
        {
            return Ok(format!("{y:04}-{m:02}-{d:02}T{clock}"));
        }
    }
    Err(String::new())
}

/// `#1e90ff`, `#1E90FF`, `#19f`, `1e90ff` → `#1e90ff`.
fn colour(text: &str) -> Parsed<String> {
    let hex = text.strip_prefix('#').unwrap_or(text).to_ascii_lowercase();
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(String::new());
    }
    match hex.len() {
        6 => Ok(format!("#{hex}")),
        3 => Ok(hex.chars().fold(String::from("#"), |mut out, c| {
            out.push(c);
            out.push(c);
            out
        })),
        _ => Err(String::new()),
    }
}

/// A finite number, written as HTML's valid floating-point numbers are (`42`, `-3.5`, `0.25`).
fn number(text: &str) -> Parsed<String> {
    if text.contains(',') {
        return Err("use a dot for decimals and no thousands separators".into());
    }
    let n: f64 = text.parse().map_err(|_| String::new())?;
    if !n.is_finite() {
        return Err(String::new());
    }
    // Rust writes finite numbers in plain decimal notation, which HTML accepts.
    Ok(format!("{}", n + 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(kind: ValueKind, text: &str, lang: &str) -> Option<String> {
        control_value(kind, text, lang).ok()
    }

    #[test]
    fn dates_in_unambiguous_spellings_are_converted() {
        let date = |text: &str, lang: &str| value(ValueKind::Date, text, lang);
        assert_eq!(date("2027-03-15", "").as_deref(), Some("2027-03-15"));
        assert_eq!(date("2027/3/5", "").as_deref(), Some("2027-03-05"));
        assert_eq!(date("03/15/2027", "").as_deref(), Some("2027-03-15"));
        assert_eq!(date("15.03.2027", "de").as_deref(), Some("2027-03-15"));
        assert_eq!(date("15 March 2027", "").as_deref(), Some("2027-03-15"));
        assert_eq!(date("March 15th, 2027", "").as_deref(), Some("2027-03-15"));
        assert_eq!(date("Mon, 15 Mar 2027", "").as_deref(), Some("2027-03-15"));
        assert_eq!(date("03/04/2027", "en-US").as_deref(), Some("2027-03-04"));
        assert_eq!(date("03/04/2027", "en-GB").as_deref(), Some("2027-04-03"));
        assert_eq!(date("03/04/2027", "fr").as_deref(), Some("2027-04-03"));
        assert_eq!(date("03/04/2027", "en-CA"), None);
        assert_eq!(date("03/04/2027", "ja"), None);
        assert_eq!(date("04/04/2027", "").as_deref(), Some("2027-04-04"));
        for refused in [
            "03/04/2027",
            "2027-02-30",
            "15/15/2027",
            "tomorrow",
            "15 March",
            "3/15/27",
            "",
        ] {
            assert_eq!(date(refused, ""), None, "{refused}");
        }
        let error = control_value(ValueKind::Date, "03/04/2027", "").unwrap_err();
        assert!(error.message.contains("YYYY-MM-DD"), "{}", error.message);
        assert!(error.hint.contains("2027-03-15"), "{}", error.hint);
    }

    #[test]
    fn times_months_weeks_and_date_times() {
        let time = |text: &str| value(ValueKind::Time, text, "");
        assert_eq!(time("13:45").as_deref(), Some("13:45"));
        assert_eq!(time("9:05").as_deref(), Some("09:05"));
        assert_eq!(time("13:45:00").as_deref(), Some("13:45"));
        assert_eq!(time("13:45:30").as_deref(), Some("13:45:30"));
        assert_eq!(time("13:45:30.250").as_deref(), Some("13:45:30.25"));
        assert_eq!(time("1:45 PM").as_deref(), Some("13:45"));
        assert_eq!(time("12 a.m.").as_deref(), Some("00:00"));
        for refused in ["25:00", "13:5", "13", "1:45 XM", "noon", "13:45:30:10"] {
            assert_eq!(time(refused), None, "{refused}");
        }
        let month = |text: &str| value(ValueKind::Month, text, "");
        assert_eq!(month("2027-03").as_deref(), Some("2027-03"));
        assert_eq!(month("March 2027").as_deref(), Some("2027-03"));
        assert_eq!(month("3/2027").as_deref(), Some("2027-03"));
        assert_eq!(month("2027-13"), None);
        let week = |text: &str| value(ValueKind::Week, text, "");
        assert_eq!(week("2027-W11").as_deref(), Some("2027-W11"));
        assert_eq!(week("2027 w3").as_deref(), Some("2027-W03"));
        assert_eq!(week("2027-11"), None);
        assert_eq!(week("2027-W54"), None);
        let local = |text: &str| value(ValueKind::DateTimeLocal, text, "en-US");
        assert_eq!(
            local("2027-03-15T13:45").as_deref(),
            Some("2027-03-15T13:45")
        );
        assert_eq!(
            local("2027-03-15 13:45:00").as_deref(),
            Some("2027-03-15T13:45")
        );
        assert_eq!(
            local("03/15/2027 1:45 PM").as_deref(),
            Some("2027-03-15T13:45")
        );
        assert_eq!(
            local("15 March 2027 13:45").as_deref(),
            Some("2027-03-15T13:45")
        );
        assert_eq!(local("2027-03-15"), None);
    }

    #[test]
    fn colours_and_numbers() {
        let colour = |text: &str| value(ValueKind::Color, text, "");
        assert_eq!(colour("#1E90FF").as_deref(), Some("#1e90ff"));
        assert_eq!(colour("#19f").as_deref(), Some("#1199ff"));
        assert_eq!(colour("blue"), None);
        let number = |text: &str| value(ValueKind::Number, text, "");
        assert_eq!(number("42").as_deref(), Some("42"));
        assert_eq!(number(" -3.50 ").as_deref(), Some("-3.5"));
        assert_eq!(number("-0").as_deref(), Some("0"));
        for refused in ["1,5", "NaN", "inf", "ten", ""] {
            assert_eq!(number(refused), None, "{refused}");
        }
    }
}
