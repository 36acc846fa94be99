// Progressive enhancement for the quarantine queue: a "select all on this page" checkbox. The
// page works without it (each row has its own checkbox).
(function () {
  var selectAll = document.getElementById("select-all");
  if (!selectAll) return;
  var rows = document.querySelectorAll('input[name="selected"][form="bulk-form"]');
  selectAll.closest(".select-all-row").hidden = false;
  selectAll.addEventListener("change", function () {
    rows.forEach(function (box) { box.checked = selectAll.checked; });
  });
})();
