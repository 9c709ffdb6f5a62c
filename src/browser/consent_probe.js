// Whether autoconsent could find a consent dialog in this document: one of its rules' selectors
// is here, or one of its own CMP classes would detect its dialog, or (top document only, where
// its generic patterns run) the page says what such a dialog says. `selectors` and `patterns`
// are given by the caller. An xpath/ selector is an XPath; a selector this browser does not
// understand matches nothing.
function maybe(top) {
  var found = function (selector) {
    try {
      if (selector.indexOf('xpath/') === 0) {
        return !!document.evaluate(selector.slice(6), document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
      }
      return !!document.querySelector(selector);
    } catch (_) {
      return false;
    }
  };
  if (selectors.some(found) || dynamicCmp(found)) return true;
  if (!top || !document.body) return false;
  var text = document.body.innerText || '';
  // A banner sits near the start or the end of a page's text: a huge page is looked at there.
  if (text.length > 200000) text = text.slice(0, 100000) + '\n' + text.slice(-100000);
  return patterns.some(function (pattern) { return text.search(pattern) >= 0; });
}

// autoconsent's own CMP classes (its `dynamicCMPs`), whose detection is code rather than rules:
// what each of them looks for first.
function dynamicCmp(found) {
  var url = new URL(location.href);
  var checks = {
    TrustArcTop: function () { return found('#truste-show-consent,#truste-consent-track'); },
    Cookiebot: function () { return !!window.Cookiebot || found('#CybotCookiebotDialog'); },
    SourcePoint: function () {
      return /(^|\.)sp-prod\.net$/.test(url.hostname)
        || (/\/index\.html$/.test(url.pathname)
          && (url.searchParams.has('message_id') || url.searchParams.has('requestUUID') || url.searchParams.has('consentUUID')));
    },
    ConsentManager: function () { return typeof window.__cmp === 'function' || found('#cmpbox'); },
    Evidon: function () { return found('#_evidon_banner'); },
    Onetrust: function () { return found('#onetrust-banner-sdk,#onetrust-pc-sdk'); },
    Klaro: function () { return found('.klaro'); },
    Uniconsent: function () { return found('.unic'); },
    Conversant: function () { return found('.cmp-root'); },
    Tiktok: function () { return /tiktok/.test(location.href); },
    Tumblr: function () { return /^https:\/\/(www\.)?tumblr\.com\//.test(location.href); },
    Admiral: function () {
      return found('div[class*=Card] button[class*=Pills__StyledPill]')
        || (!!document.body && (document.body.innerText || '').indexOf('Admiral') >= 0);
    },
  };
  for (var name in checks) if (checks[name]()) return true;
  return false;
}
