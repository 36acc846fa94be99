// The periodic task form (admin): shows the chosen crontab in words under the crontab field, as
// django-celery-beat's own inline script does; a file, so the admin runs under the CSP. With no
// crontab chosen there is nothing to translate, so only the field's own help shows.
(function () {
  var $ = django.jQuery;
  var readable = JSON.parse(document.getElementById("readable-crontabs").textContent);
  var help = $(".field-crontab .help");
  var original = help.text().trim();
  $(".field-crontab_translation").hide();
  function show() {
    var words = readable[$("#id_crontab").val()];
    help.empty().append(document.createTextNode(original));
    if (words) {
      help.append($("<br>"), document.createTextNode("Translation: " + words));
    }
  }
  $(".field-crontab").change(show);
  show();
})();
