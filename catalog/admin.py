"""The catalog's admin: tags, container images with their checks on the clusters, and the
session apps (the shipped ones and those a centre adds, checked as hostile input)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django import forms
from django.contrib import admin, messages
from django.db.models import Count
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from catalog import checks as image_checks
from catalog.models import ContainerImage, ImageCheck, SessionApp, Tag
from clusters.models import Cluster

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _Images(TypedDict):
    _images: int


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ("name",)
    list_display = ("name", "image_count")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_images=Count("images"))

    @admin.display(description="images", ordering="_images")
    def image_count(self, obj: WithAnnotations[Tag, _Images]) -> int:
        return obj._images


class ImageCheckInline(admin.TabularInline):
    model = ImageCheck
    extra = 0
    can_delete = False
    fields = ("cluster", "ok", "checked_at", "checked_as", "report")
    readonly_fields = fields
    verbose_name_plural = "Checks on the clusters (the admin action “Check on the clusters”)"

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ContainerImage)
class ContainerImageAdmin(admin.ModelAdmin):
    # Availability and the last cluster check come first: at a laptop's width the last
    # columns are the ones that scroll out of sight.
    list_display = (
        "name",
        "version",
        "availability",
        "cluster_checks",
        "runtime",
        "short_location",
        "session_kinds",
        "tag_list",
        "sort_order",
    )
    list_display_links = ("name",)
    list_editable = ("sort_order",)
    list_filter = (
        "enabled",
        "deprecated",
        "runtime",
        "supports_gpu",
        "offers_notebook",
        "offers_batch",
        "offers_tensorboard",
        "offers_vscode",
        "tags",
    )
    search_fields = ("name", "slug", "version", "description", "location", "tags__name")
    prepopulated_fields = {"slug": ("name", "version")}
    filter_horizontal = ("tags",)
    list_per_page = 50
    ordering = ("sort_order", "name", "version")

    class Media:
        css = {"all": ["frontend/admin.css"]}

    actions = ("check_on_clusters", "enable", "disable", "deprecate", "undeprecate", "duplicate")
    inlines = (ImageCheckInline,)
    readonly_fields = ("created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "version", "slug", "description", "tags", "sort_order")}),
        ("Runtime", {"fields": ("runtime", "location", "modules", "supports_gpu")}),
        (
            "Offered for",
            {
                "fields": (
                    "offers_notebook",
                    "offers_batch",
                    "offers_tensorboard",
                    "offers_vscode",
                    "default_command",
                    "default_launcher",
                    "default_nodes",
                    "default_tasks_per_node",
                )
            },
        ),
        (
            "Availability",
            {"fields": ("enabled", "deprecated", "deprecation_note", "created_at", "updated_at")},
        ),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("tags", "checks__cluster")

    @admin.display(description="availability", ordering="enabled")
    def availability(self, obj: ContainerImage) -> str:
        if not obj.enabled:
            return mark_safe('<span class="portal-state off">disabled</span>')
        if obj.deprecated:
            return format_html(
                '<span class="portal-state deprecated" title="{}">deprecated</span>',
                obj.deprecation_note,
            )
        return mark_safe('<span class="portal-state on">offered</span>')

    @admin.display(description="on clusters")
    def cluster_checks(self, obj: ContainerImage) -> str:
        checks = list(obj.checks.all())
        if not checks:
            return "not checked"
        return format_html_join(
            " ",
            '<span class="portal-check {}" title="{}">{} {}</span>',
            (
                ("ok" if c.ok else "bad", c.report, "✔" if c.ok else "✘", c.cluster.name)
                for c in checks
            ),
        )

    @admin.display(description="location")
    def short_location(self, obj: ContainerImage) -> str:
        loc = obj.location or "(host)"
        return loc if len(loc) <= 48 else "…" + loc[-47:]

    @admin.display(description="kinds")
    def session_kinds(self, obj: ContainerImage) -> str:
        return ", ".join(obj.kinds)

    @admin.display(description="tags")
    def tag_list(self, obj: ContainerImage) -> str:
        return format_html_join(
            " ", '<span class="portal-tag">{}</span>', ((t.name,) for t in obj.tags.all())
        )

    @admin.action(
        description="Check on the clusters (runtime, image file, modules)", permissions=["change"]
    )
    def check_on_clusters(self, request, queryset):
        images = list(queryset)
        for cluster in Cluster.objects.filter(enabled=True):
            checks = image_checks.run(images, cluster, request.user)
            bad = [c for c in checks if not c.ok]
            if not bad:
                self.message_user(
                    request,
                    f"All {len(checks)} image(s) are ready on {cluster.name}.",
                    messages.SUCCESS,
                )
            for check in bad:
                self.message_user(
                    request,
                    f"{check.image} on {cluster.name}: " + "; ".join(check.problems),
                    messages.ERROR,
                )

    @admin.action(description="Enable selected images", permissions=["change"])
    def enable(self, request, queryset):
        n = queryset.update(enabled=True)
        self.message_user(request, f"Enabled {n} image(s).", messages.SUCCESS)

    @admin.action(description="Disable selected images (hidden from users)", permissions=["change"])
    def disable(self, request, queryset):
        n = queryset.update(enabled=False)
        self.message_user(request, f"Disabled {n} image(s).", messages.SUCCESS)

    @admin.action(
        description="Deprecate selected images (not offered for new jobs)", permissions=["change"]
    )
    def deprecate(self, request, queryset):
        n = queryset.update(deprecated=True)
        self.message_user(
            request, f"Deprecated {n} image(s); running jobs are not affected.", messages.SUCCESS
        )

    @admin.action(description="Un-deprecate selected images", permissions=["change"])
    def undeprecate(self, request, queryset):
        n = queryset.update(deprecated=False)
        self.message_user(request, f"{n} image(s) are offered again.", messages.SUCCESS)

    @admin.action(
        description="Duplicate selected images (copies start disabled)", permissions=["add"]
    )
    def duplicate(self, request, queryset):
        copies = [image.duplicate() for image in queryset]
        self.message_user(
            request,
            format_html(
                "Created {} disabled cop{}: {}",
                len(copies),
                "y" if len(copies) == 1 else "ies",
                ", ".join(c.slug for c in copies),
            ),
            messages.SUCCESS,
        )


class SessionAppAdminForm(forms.ModelForm):
    class Meta:
        model = SessionApp
        fields = [
            "name",
            "slug",
            "description",
            "enabled",
            "sort_order",
            "image",
            "command",
            "ready_path",
            "ready_status",
            "fields",
            "start_path",
            "shareable_read_only",
        ]
        widgets = {
            "command": forms.Textarea(attrs={"rows": 3, "cols": 100}),
            "fields": forms.Textarea(attrs={"rows": 8, "cols": 100}),
        }


@admin.register(SessionApp)
class SessionAppAdmin(admin.ModelAdmin):
    """The apps a session runs: the shipped ones (JupyterLab, TensorBoard, VS Code: turn
    them off, rename or reorder them) and those the centre adds (checked as hostile
    input: catalog/app_command.py)."""

    form = SessionAppAdminForm
    list_display = (
        "name",
        "slug",
        "shipped",
        "image",
        "enabled",
        "shareable_read_only",
        "sort_order",
    )
    list_editable = ("enabled", "sort_order")
    list_filter = ("enabled", "shareable_read_only")
    search_fields = ("name", "slug", "description", "command")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("builtin", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "slug", "description", "builtin", "enabled", "sort_order")}),
        ("How it starts", {"fields": ("image", "command", "ready_path", "ready_status")}),
        ("On the launch form and in the browser", {"fields": ("fields", "start_path")}),
        ("Sharing", {"fields": ("shareable_read_only",)}),
        (None, {"fields": ("updated_at",)}),
    )

    @admin.display(description="shipped", boolean=True)
    def shipped(self, obj: SessionApp) -> bool:
        return bool(obj.builtin)

    def has_delete_permission(self, request, obj: SessionApp | None = None) -> bool:
        # A shipped app is turned off, not deleted (its kind's sessions look it up).
        return super().has_delete_permission(request, obj) and not (obj and obj.builtin)
