(function(){
  if (!/[?&]selftest\b/.test(location.search)) return;
  var errs = [];
  window.addEventListener('error', function(e){
    var t = e.target;
    if (t && t !== window && (t.src || t.href)) errs.push('failed to load ' + (t.src || t.href));
    else errs.push('script error: ' + e.message);
  }, true);
  window.addEventListener('unhandledrejection', function(e){ errs.push('unhandled rejection: ' + e.reason); });
  ['error', 'warn'].forEach(function(k){
    var f = console[k];
    console[k] = function(){ errs.push('console.' + k + ': ' + Array.prototype.join.call(arguments, ' ')); return f.apply(console, arguments); };
  });
  window.addEventListener('load', function(){
    var bad = [], imgs = document.images;
    for (var i = 0; i < imgs.length; i++) {
      var im = imgs[i];
      if (!(im.complete && im.naturalWidth > 0 && im.naturalHeight > 0)) bad.push(im.getAttribute('src'));
    }
    var out = document.getElementById('selftest');
    out.hidden = false;
    var lines = [(errs.length || bad.length) ? 'SELFTEST FAIL' : 'SELFTEST OK', 'images: ' + imgs.length, 'broken images: ' + bad.length];
    bad.forEach(function(s){ lines.push('broken: ' + s); });
    lines.push('errors: ' + errs.length);
    errs.forEach(function(s){ lines.push('error: ' + s); });
    out.textContent = lines.join('\n');
  });
})();
