// The periodic task form (admin): shows the chosen crontab in words under the crontab field, as
// django-celery-beat's own inline script does; a file, so the admin runs under the CSP.
(function () {
  var $ = django.jQuery;
  var readable = JSON.parse(document.getElementById("readable-crontabs").textContent);
  var help = $(".field-crontab .help");
  var original = help.text().trim();
  $(".field-crontab_translation").hide();
  $(".field-crontab").change(function () {
    var words = readable[$("#id_crontab").val()];
    help.empty().append(document.createTextNode(original), $("<br>"), document.createTextNode("Translation: " + (words || "")));
  });
})();
